"""The Python package on NumPy files, checked against numpy itself: tensorbox.safe_open and
load_file read what numpy.save / savez / savez_compressed write (numpy.load's arrays: dtype,
shape and bytes, big-endian arrays as their little-endian values, Fortran-order arrays in
row-major order, 0-d and empty arrays), and save_file writes .npz / .npy files numpy.load reads
back (the .npy byte-identical to numpy.save's). The arrays are test_npy_interop.py's.
"""
from __future__ import annotations

from conftest import need
from test_npy_interop import arrays, le_array

np = need("numpy")
tensorbox = need("tensorbox")

# ------------------------------------------------------------------------------------------
PY_KEYS = ("bool", "c8", "c16", "be_f4", "be_c16", "be_i8", "scalar_be_i8", "scalar_bool",
           "fortran_f4", "fortran_be_u2", "fortran_c16_3d", "empty_i2_3x0", "f2", "u8")


def check_py_array(got, want, key):
    want = le_array(want)
    assert got.dtype == want.dtype, key
    assert got.shape == want.shape, key
    assert got.tobytes() == want.tobytes(), key  # bit for bit (NaNs included)


def test_python_package_reads_what_numpy_writes(tmp_path):
    a = arrays()
    for k in PY_KEYS:
        p = tmp_path / f"{k}.npy"
        np.save(p, a[k])
        with tensorbox.safe_open(str(p)) as f:
            assert f.format == "npy" and list(f.keys()) == ["arr_0"]
            check_py_array(f.get_tensor("arr_0"), np.load(p), k)
        check_py_array(tensorbox.load_file(str(p))["arr_0"], a[k], k)
    for compressed in (False, True):
        p = tmp_path / f"sel-{compressed}.npz"
        (np.savez_compressed if compressed else np.savez)(p, **{k: a[k] for k in PY_KEYS})
        got = tensorbox.load_file(str(p))
        with np.load(p) as ref:
            assert sorted(got) == sorted(ref.files)
            for k in PY_KEYS:
                check_py_array(got[k], ref[k], k)


def test_python_package_writes_what_numpy_loads(tmp_path):
    a = arrays()
    src = {k: le_array(a[k]) for k in ("bool", "c8", "c16", "f2", "i8", "scalar_f4", "empty_f4")}
    p = tmp_path / "py.npz"
    tensorbox.save_file(src, str(p))
    with np.load(p) as ref:
        assert sorted(ref.files) == sorted(src)
        for k, v in src.items():
            check_py_array(ref[k], v, k)
    q = tmp_path / "py.npy"
    tensorbox.save_file({"x": src["c16"]}, str(q))
    r = tmp_path / "ref.npy"
    np.save(r, src["c16"])
    assert q.read_bytes() == r.read_bytes()
