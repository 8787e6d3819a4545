"""The dashboard's Compare page of one ladder: the comparisons `ladder compare A <this ladder>` saved under its
folder (<root>/<ladder>/compare/<A>.json, this ladder as B), each with the comparison page's figures
(ladder.report.compare_figures): the per-size effect with its bands, the trend out to the hero, the hero's
predicted effect and, when both heroes ran, their actual difference."""

from __future__ import annotations

from ladder.outputs import layout
from ladder.outputs.files import json_safe, safe_name


class CompareView:
    """The Compare view, mixed into the dashboard's Root (it needs ladder_dir and files)."""

    def compare(self, ladder: str) -> dict:
        from ladder.report.compare_figures import delta_figure, multiplier_figure

        ld = self.ladder_dir(ladder)
        folder = ld / layout.COMPARE_DIR if ld is not None else None
        paths = sorted(p for p in folder.glob("*.json") if safe_name(p.stem)) if folder and folder.is_dir() else []
        out = []
        for path in paths:
            record = self.files.json(path)
            effect = record.get("effect") if isinstance(record, dict) else None
            if not isinstance(effect, dict) or not effect.get("per_size") or not effect.get("trend"):
                # a file being written, or not a comparison: named, not drawn
                out.append({"against": path.stem, "error": f"{path.name} is not a comparison `ladder compare` saved"})
                continue
            out.append(json_safe({
                "against": path.stem, "a": record.get("a") or {}, "b": record.get("b") or {},
                "verdict": record.get("verdict"), "saved_at": record.get("saved_at"), "noise": effect.get("noise"),
                "level": effect.get("level"), "trend": {k: v for k, v in effect["trend"].items() if k != "curve"},
                "per_size": effect["per_size"], "at_hero": effect.get("at_hero"), "heroes": effect.get("heroes"),
                "backtest": effect.get("backtest"), "after_change": effect.get("after_change"),
                "figures": {"mult": multiplier_figure(effect), "delta": delta_figure(effect)},
            }))
        return {"ladder": ladder, "comparisons": out}
