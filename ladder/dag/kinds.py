"""The kind of each ladder step: the name its hash covers in place of where its function lives.

Frozen. Each is the "module:function" string the step was hashed by before steps declared a kind, so
every ladder run before keeps its directories; changing one moves every finished step of that kind
to a new directory (tests/core/test_step_hashes.py pins the hashes). They are names, not import
paths: the functions that run the steps live wherever the code puts them (see Step.fn).
"""

TRAIN = "ladder.stages:train_step"
IMPORT = "ladder.stages:import_step"
FIT = "ladder.stages:fit_step"
PREDICT = "ladder.stages:predict_step"
GATE = "ladder.stages:gate_step"
REPORT = "ladder.stages:report_step"
ISOFLOP = "ladder.isoflop:isoflop_step"
REUSE = "ladder.isoflop:reuse_step"
LR_SWEEP = "ladder.sweep:collect_step"
# Steps that first declared a kind: names of what they do.
TOKENIZE = "tokenize"
BPE_TOKENIZER = "tokenizer_bpe"
