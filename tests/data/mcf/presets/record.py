"""Records mantle's runs of tbx's preset MCF files for tests/python/test_mcf_presets.py
(test_mantle_runs_the_preset): run by hand, never by CI, with a mantle binary built from
github.com/samcharles93/mantle 803be32 (tests/data/mcf/README.md):

    TBX=build/tbx TBX_MANTLE=/path/to/mantle .venv/bin/python tests/data/mcf/presets/record.py

For each preset of MANTLE_PRESETS it builds the test's llama directory (same seed and sizes),
converts it with `tbx convert DIR out.mcf --quant PRESET`, runs `mantle trace` on that file and
writes mantle.json (the file's sha256 and size, mantle's exit status, the trace's record:
test_mcf_presets.trace_record) and <PRESET>.hidden.f32 (the trace's hidden states as f32).
It rewrites those files only; README.md is written by hand."""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "python"))

import test_mcf_presets as T  # noqa: E402


def main() -> int:
    tbx, mantle = os.environ.get("TBX"), os.environ.get("TBX_MANTLE")
    if not tbx or not mantle:
        print("TBX=tbx binary and TBX_MANTLE=mantle binary are required", file=sys.stderr)
        return 2
    out = {"format": 1, "mantle": "github.com/samcharles93/mantle 803be32",
           "prompt": T.MANTLE_PROMPT, "model": T.LLAMA, "sketch_k": T.SKETCH_K,
           "made_by": "tests/data/mcf/presets/record.py", "presets": {}}
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        hf = d / "llama-hf"
        T.make_model(hf, "llama", **T.LLAMA)
        for preset in T.MANTLE_PRESETS:
            mcf = d / f"{preset}.mcf"
            subprocess.run([tbx, "convert", hf, mcf, "--quant", preset], check=True,
                           capture_output=True)
            blob = mcf.read_bytes()
            tr = T.mantle_trace(mantle, mcf, d)
            rec, hidden = T.trace_record(tr)
            name = f"{preset}.hidden.f32"
            (HERE / name).write_bytes(hidden)
            out["presets"][preset] = {"mcf_sha256": hashlib.sha256(blob).hexdigest(),
                                      "mcf_size": len(blob), "mantle_rc": 0,
                                      "mantle_command": f"mantle trace -m {preset}.mcf --prompt "
                                                        f"{T.MANTLE_PROMPT!r} --no-template",
                                      "hidden_file": name, **rec}
            print(preset, len(blob), rec["trace_f32_sha256"][:16])
    text = json.dumps(out, indent=1)
    # one line per list of numbers
    text = re.sub(r"\[\s+([-+0-9.e,\s]+?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]",
                  text)
    (HERE / "mantle.json").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
