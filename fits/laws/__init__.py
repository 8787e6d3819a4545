"""The laws themselves: each a frozen dataclass with predict() and its parameters, importing nothing
of how it is fitted. The modules beside (fits.chinchilla, fits.compute, fits.curves, ...) fit them
and return a FitResult; registry.build_law rebuilds a law from a FitResult's name and parameters.
"""
