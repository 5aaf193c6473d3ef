"""Loading libqattn (the flat C interface of lib/qattn_lib.h) with ctypes."""
import ctypes
import os

_c = ctypes
_f32p = _c.POINTER(_c.c_float)
_f64p = _c.POINTER(_c.c_double)
_i64p = _c.POINTER(_c.c_int64)
_sz = _c.c_size_t


def _candidates():
    env = os.environ.get("QATTN_LIB")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libqattn.so")  # an installed copy (scripts/python-install)
    yield os.path.join(os.path.dirname(os.path.dirname(here)), "build", "lib", "libqattn.so")  # the repository's build/


def load():
    """The library with its functions' signatures; ImportError naming where it looked."""
    tried = []
    for path in _candidates():
        tried.append(path)
        if os.path.exists(path):
            lib = _c.CDLL(path)
            break
    else:
        raise ImportError("qattn: libqattn.so not found (looked at %s); build it with scripts/test or "
                          "scripts/python-install, or set QATTN_LIB" % ", ".join(tried))
    lib.qattn_lib_version.restype = _c.c_char_p
    lib.qattn_lib_scheme_count.restype = _sz
    for name in ("qattn_lib_scheme_name", "qattn_lib_scheme_spec", "qattn_lib_kernel_name", "qattn_lib_kernel_path",
                 "qattn_lib_kernel_family"):
        fn = getattr(lib, name)
        fn.argtypes = [_sz]
        fn.restype = _c.c_char_p
    lib.qattn_lib_scheme_parse.argtypes = [_c.c_char_p, _c.c_char_p, _sz, _c.c_char_p, _sz]
    lib.qattn_lib_scheme_parse.restype = _c.c_int
    shape = [_sz, _sz, _sz, _sz, _sz, _i64p, _sz]
    lib.qattn_lib_emulate.argtypes = ([_c.c_char_p, _c.c_char_p, _c.c_double, _f32p, _f32p, _f32p] + shape +
                                      [_f32p, _f32p, _c.c_char_p, _sz])
    lib.qattn_lib_emulate.restype = _c.c_int
    lib.qattn_lib_reference.argtypes = ([_c.c_char_p, _c.c_double, _f32p, _f32p, _f32p] + shape +
                                        [_f64p, _f64p, _c.c_char_p, _sz])
    lib.qattn_lib_reference.restype = _c.c_int
    lib.qattn_lib_kernel_count.restype = _sz
    lib.qattn_lib_kernel_describe.argtypes = [_sz, _c.c_char_p, _sz]
    lib.qattn_lib_kernel_describe.restype = _c.c_char_p
    lib.qattn_lib_kernel_backend.restype = _c.c_char_p
    vp, strides = _c.c_void_p, _i64p
    lib.qattn_lib_gpu_attention.argtypes = ([_c.c_char_p, _c.c_char_p, _c.c_double, _c.c_char_p] + [_c.c_int] * 6 +
                                            [vp, strides, vp, strides, vp, strides, vp, strides, vp, vp, vp,
                                             _c.c_int64, _c.c_int64, vp, _c.POINTER(_sz), vp, _c.c_char_p, _sz])
    lib.qattn_lib_gpu_attention.restype = _c.c_int
    lib.qattn_lib_gpu_prepare.argtypes = ([_c.c_char_p, _c.c_char_p, _c.c_double, _c.c_char_p] + [_c.c_int] * 6 +
                                          [strides] * 4 + [_c.c_int, _c.c_int, _c.c_int64, _c.c_int64,
                                                           _c.POINTER(_sz), _c.c_char_p, _sz])
    lib.qattn_lib_gpu_prepare.restype = _c.c_int
    lib.qattn_lib_gpu_run.argtypes = [_c.c_int, vp, vp, vp, vp, vp, vp, vp, vp, _sz, vp, _c.c_char_p, _sz]
    lib.qattn_lib_gpu_run.restype = _c.c_int
    lib.qattn_lib_scheme_out.argtypes = [_c.c_char_p]
    lib.qattn_lib_scheme_out.restype = _c.c_char_p
    lib.path = path
    return lib
