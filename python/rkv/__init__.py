# SPDX-License-Identifier: Apache-2.0
# rkv: Python client of rkv, a remote key-value store for RDMA networks (docs/python.md).
#
# Contract: re-exports rkv.Client (the C++ extension rkv._rkv over rkv::Client) and the
# exceptions of rkv._errors. A Client may be shared by threads (its calls are serialized and
# release the GIL while they wait on the network); it owns its connection until close().
"""rkv: a remote key-value store for RDMA networks.

    import rkv
    with rkv.Client("10.0.0.1:7470", auth_token_file="/home/me/.rkv-token") as c:
        c.put(b"user1", b"hello")
        assert c.get(b"user1") == b"hello"
        c.get(b"nobody")      # None
        c.delete(b"user1")    # True

Errors raise rkv.Error subclasses (rkv.Timeout, rkv.Unauthenticated, ...) with .code and
.code_name. See docs/python.md.
"""

from rkv._errors import *  # noqa: F401,F403  (Error and its subclasses, CODES)
from rkv._errors import __all__ as _errors_all
from rkv._rkv import Client
from rkv._version import __license__, __version__  # noqa: F401

__all__ = ["Client"] + list(_errors_all)
