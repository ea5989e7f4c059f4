#!/usr/bin/env python3
"""Seeds for fuzz_imatrix: legacy .dat importance matrices as llama-imatrix's
save_imatrix_legacy writes them (n_entries; per entry name, ncall, nval, values; the chunk
count and the dataset), with and without the optional trailer, and a few broken ones."""
import struct
import sys
from pathlib import Path


def dat(entries, trailer=(10, b"wiki.train.raw")):
    b = struct.pack("<i", len(entries))
    for name, ncall, vals in entries:
        b += struct.pack("<i", len(name)) + name + struct.pack("<ii", ncall, len(vals))
        b += struct.pack(f"<{len(vals)}f", *vals)
    if trailer is not None:
        b += struct.pack("<i", trailer[0])
        if trailer[1] is not None:
            b += struct.pack("<i", len(trailer[1])) + trailer[1]
    return b


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    two = [(b"blk.0.attn_q.weight", 3, [1.0, 2.0, 3.0, 4.0]), (b"output.weight", 0, [0.5] * 8)]
    seeds = {
        "two.dat": dat(two),
        "no_trailer.dat": dat(two, None),
        "chunks_only.dat": dat(two, (4, None)),
        "empty_dataset.dat": dat(two, (4, b"")),
        "twice.dat": dat(two + [(b"output.weight", 1, [9.0])]),
        "cut.dat": dat(two)[:30],
        "zero.dat": struct.pack("<i", 0),
        # the most entries per byte (16 bytes each): the budget's worst case
        "many_small.dat": dat([(b"", 1, [1.0])] * 3 + [(bytes([65 + i % 26]) * (i // 26 % 3), 1,
                                                        [float(i)]) for i in range(6000)], None),
    }
    for name, b in seeds.items():
        (out / name).write_bytes(b)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "corpus" / "imatrix")
