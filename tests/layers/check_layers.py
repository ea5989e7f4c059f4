#!/usr/bin/env python3
"""The layers of libtensorbox hold: docs/architecture.md "Layers", cmake/layers.cmake.

    check_layers.py calls    build/layers.json
        Every function an object of layer L calls, when the library defines it, is defined in L
        itself or in a layer L sees (nm of the layers' objects). A call that runs up or sideways
        (a driver into the façade, one driver into another, core into anything) fails the check,
        naming the object, the symbol and the two layers; so does a public function called from
        below its layer, which the per-layer include directories cannot catch (tensorbox.h
        declares every public function to everyone). Temporary exceptions of the table
        (TBX_LAYER_TEMP_ALLOW, "layer:symbol", a trailing * matches a prefix) are listed, never
        silent.

    check_layers.py includes build/layers.json
        For every layer, a probe source including the private header of each layer it does not
        see must fail to compile with that layer's include directories, and one including its
        own header must compile: a wrong-way include cannot build.

    check_layers.py files build/layers.json
        Only the io layer (src/io: sources, the providers of sets, the atomic output and the
        edit locks) finds, examines or opens files by name: no other object may call open, stat,
        opendir, readdir, realpath, fopen or their kin (nm: undefined libc symbols, the 64-bit,
        fortified and old glibc wrappers included). A driver opens the sibling files of a set
        through its provider (src/io/provider.h), never by path.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict


def load(path):
    with open(path) as f:
        table = json.load(f)
    layers = {}
    for l in table["layers"]:
        l["objects"] = [o for o in l["objects"].split("|") if o]
        layers[l["name"]] = l
    allow = [a for a in table.get("allow", "").split() if a]
    return table, layers, allow


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "TDRBCG":
            defined.add(p[2])
        elif len(p) == 2 and p[0] == "U":
            undefined.add(p[1])
    return defined, undefined


def allowed(allow, layer, sym):
    for a in allow:
        l, _, s = a.partition(":")
        if l != layer:
            continue
        if s == sym or (s.endswith("*") and sym.startswith(s[:-1])):
            return True
    return False


def check_calls(path):
    _, layers, allow = load(path)
    owner = {}
    undef = {}
    for name, l in layers.items():
        if not l["objects"]:
            print(f"layer {name}: no objects (build the library first)")
            return 1
        for o in l["objects"]:
            d, u = symbols(o)
            for s in d:
                owner[s] = name
            undef[o] = (name, u)
    bad, temp = [], defaultdict(set)
    ncalls = 0
    for obj, (name, us) in sorted(undef.items()):
        sees = set(layers[name]["sees"])
        for s in sorted(us):
            to = owner.get(s)
            if to is None or to == name:
                continue
            ncalls += 1
            if to in sees:
                continue
            if allowed(allow, name, s):
                temp[(name, to)].add(s)
                continue
            bad.append(f"{os.path.basename(obj)[:-2]} ({name}) calls {s} ({to}): "
                       f"{name} sees only {', '.join(sorted(sees)) or 'nothing'}")
    print(f"{len(layers)} layers, {sum(len(l['objects']) for l in layers.values())} objects, "
          f"{ncalls} calls across layers checked")
    for (a, b), syms in sorted(temp.items()):
        print(f"temporary exception: {a} -> {b}: {', '.join(sorted(syms))}")
    for b in bad:
        print("WRONG WAY:", b)
    return 1 if bad else 0


def own_header(layer):
    """A private header of the layer (the first *.h of its first folder)."""
    for d in layer["dirs"]:
        hs = sorted(h for h in os.listdir(d) if h.endswith(".h"))
        if hs:
            return hs[0]
    return None


def include_flags(layers, name):
    flags = []
    for l in [name] + layers[name]["sees"]:
        flags += ["-I" + d for d in layers[l]["dirs"]]
    return flags


def compiles(cc, table, flags, header, tmp):
    src = os.path.join(tmp, "probe.c")
    with open(src, "w") as f:
        f.write(f'#include "{header}"\nint tbx_layer_probe(void) {{ return 0; }}\n')
    r = subprocess.run([cc, "-fsyntax-only", "-std=c11", "-I" + table["include"], *flags, src],
                       capture_output=True, text=True)
    return r.returncode == 0, r.stderr.strip().splitlines()[:1]


def check_includes(path):
    table, layers, _ = load(path)
    cc = table["cc"]
    bad = []
    n = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, l in layers.items():
            flags = include_flags(layers, name)
            own = own_header(l)
            if own:
                ok, why = compiles(cc, table, flags, own, tmp)
                if not ok:
                    bad.append(f"{name}: its own header {own} does not compile: {why}")
            # the headers of layers it does not see, each once (a folder without a header of its
            # own, such as the registry's parent, is skipped)
            for other, lo in layers.items():
                if other == name or other in l["sees"]:
                    continue
                hdr = own_header(lo)
                if not hdr or own == hdr:
                    continue
                # a header of the same name in a layer it sees would be found instead: skip
                if any(os.path.exists(os.path.join(d, hdr))
                       for s in [name] + l["sees"] for d in layers[s]["dirs"]):
                    continue
                n += 1
                ok, _ = compiles(cc, table, flags, hdr, tmp)
                if ok:
                    bad.append(f"{name} can include {hdr} of {other}, a layer it does not see")
    print(f"{len(layers)} layers, {n} wrong-way includes tried, each refused by the compiler"
          if not bad else "")
    for b in bad:
        print("WRONG WAY:", b)
    return 1 if bad else 0


# Calls that find, examine or open a file by its name (or read a directory). The libc symbol an
# object refers to may be the plain name, its 64-bit twin, a fortified wrapper (__open_2) or an
# old glibc wrapper (__xstat); "@..." versions are stripped first.
FILE_CALLS = set("""
    open open64 __open_2 __open64_2 openat openat64 __openat_2 __openat64_2 creat creat64
    fopen fopen64 freopen freopen64 open_by_handle_at name_to_handle_at
    stat stat64 lstat lstat64 fstatat fstatat64 statx __xstat __xstat64 __lxstat __lxstat64
    __fxstatat __fxstatat64 access faccessat eaccess euidaccess
    opendir fdopendir readdir readdir64 readdir_r readdir64_r scandir scandir64 scandirat
    glob glob64 nftw nftw64 ftw ftw64 fts_open
    realpath __realpath_chk canonicalize_file_name readlink readlinkat __readlink_chk
    __readlinkat_chk
""".split())
FILE_LAYERS = {"io"}


def check_files(path):
    _, layers, _ = load(path)
    bad = []
    nobj = 0
    for name, l in layers.items():
        if not l["objects"]:
            print(f"layer {name}: no objects (build the library first)")
            return 1
        if name in FILE_LAYERS:
            continue
        for o in l["objects"]:
            nobj += 1
            _, u = symbols(o)
            for s in sorted(u):
                if s.split("@")[0] in FILE_CALLS:
                    bad.append(f"{os.path.basename(o)[:-2]} ({name}) calls {s.split('@')[0]}: "
                               f"only {', '.join(sorted(FILE_LAYERS))} opens or examines files "
                               "by name (a set's files: its provider, src/io/provider.h)")
    print(f"{nobj} objects outside {', '.join(sorted(FILE_LAYERS))} checked: none opens, "
          "examines or lists files by name" if not bad else "")
    for b in bad:
        print("FILE ACCESS:", b)
    return 1 if bad else 0


def main():
    checks = {"calls": check_calls, "includes": check_includes, "files": check_files}
    if len(sys.argv) != 3 or sys.argv[1] not in checks:
        print(__doc__)
        return 2
    return checks[sys.argv[1]](sys.argv[2])


if __name__ == "__main__":
    sys.exit(main())
