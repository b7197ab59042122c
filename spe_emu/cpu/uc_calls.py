"""Unicorn's C entry points the machine calls directly through ctypes (no per-call wrapper of
the binding), and the prototypes of the native callbacks it registers with them."""

from __future__ import annotations

import ctypes

from unicorn.unicorn_py3.unicorn import uclib

SYS_HOOK = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                            ctypes.c_void_p)  # (uc, reg, uc_arm64_cp_reg *, user data)
# uc_cb_hookcode_t: (uc, address, size, user_data)
CODE_HOOK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32,
                             ctypes.c_void_p)
# uc_cb_hookintr_t: (uc, intno, user_data)
INTR_HOOK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p)
# uc_hook_add (variadic): a function object of our own, without the binding's argtypes, so
# the binding's own prototype is left as it is (item access makes a new object each time).
UC_HOOK_ADD = uclib["uc_hook_add"]
# uc_err uc_vmem_translate(uc_engine *uc, uint64_t address, uc_prot prot, uint64_t *paddress)
UC_VMEM_TRANSLATE = uclib["uc_vmem_translate"]
UC_HOOK_DEL = uclib["uc_hook_del"]  # uc_err uc_hook_del(uc_engine *uc, uc_hook hh)
UC_HOOK_DEL.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
UC_VMEM_TRANSLATE.argtypes = (ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int,
                              ctypes.POINTER(ctypes.c_uint64))
