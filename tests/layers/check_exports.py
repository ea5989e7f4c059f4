"""No executable of the project defines a dynamic symbol that one of its shared libraries defines.

An executable's exported function takes the place of a library's function of the same name for
every caller, the libraries included (ELF interposition): tbx once had json_string and json_null
of its own, and libtensorbox's calls into jansson would have run them. This reads the dynamic
symbols each program defines (nm -D --defined-only) and those of every library it loads (ldd),
and fails naming any name both define.

  check_exports.py PROGRAM...
"""
import subprocess
import sys

# what every ELF object defines
LINKER = {"_init", "_fini", "_edata", "_end", "__bss_start", "_IO_stdin_used", "__data_start",
          "data_start", "_start", "__libc_csu_init", "__libc_csu_fini", "main"}


def defined(path):
    """The functions `path` defines (text, weak, indirect); data such as stdout is left out:
    an executable holds copies of the library variables it uses (copy relocations)."""
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    names = set()
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 3 and f[1] in ("T", "W", "i"):
            names.add(f[2].split("@")[0])
    return names - LINKER


def libraries(path):
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    libs = []
    for line in out.splitlines():
        parts = line.split("=>")
        if len(parts) == 2 and parts[1].strip().startswith("/"):
            libs.append(parts[1].split()[0])
    return libs


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    bad = 0
    for prog in sys.argv[1:]:
        mine = defined(prog)
        libs = libraries(prog)
        if not libs:
            print(f"{prog}: ldd lists no library (a test that looks at nothing)")
            return 1
        for lib in libs:
            both = sorted(mine & defined(lib))
            for name in both:
                print(f"{prog} defines {name}, which {lib} defines too: the library's callers "
                      f"would run the program's {name}")
                bad += 1
        print(f"{prog}: {len(mine)} functions exported, {len(libs)} libraries, {bad} clashes")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
