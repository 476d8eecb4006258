# SPDX-License-Identifier: Apache-2.0
# rkv's exceptions: rkv.Error and one subclass per rkv::Code (client/include/rkv/status.h).
#
# Contract: every failure of an rkv call is raised as an instance of Error (or a subclass)
# carrying .code (the int value of rkv::Code), .code_name (its stable name, e.g. "TIMEOUT") and
# .message (rkv's message). The C++ extension (_rkv) builds them with _from_status(). Exception
# classes are immutable after import: safe to share between threads. No ownership concerns.

__all__ = [
    "Error", "NotFound", "TableFull", "TooLarge", "BadRequest", "InvalidArgument",
    "ConnectionLost", "ServerRestarted", "RetriesExhausted", "IoError", "ProtocolError",
    "Timeout", "ParamMismatch", "Unauthenticated", "Busy", "Moved", "TryAgain", "Unavailable",
    "CODES",
]


class Error(Exception):
    """An rkv call failed. .code is the rkv::Code value, .code_name its name, .message rkv's text."""

    code = None
    code_name = None

    def __init__(self, message, code=None, code_name=None):
        # All three in args so that an Error survives pickling (multiprocessing, logging).
        super().__init__(message, code, code_name)
        self.message = message
        if code is not None:
            self.code = code
        if code_name is not None:
            self.code_name = code_name

    def __str__(self):
        return f"{self.code_name}: {self.message}" if self.code_name else str(self.message)

    def __repr__(self):
        return f"{type(self).__name__}({self.message!r}, code={self.code!r}, code_name={self.code_name!r})"


def _subclass(name, code, code_name, doc):
    return type(name, (Error,), {"__doc__": doc, "code": code, "code_name": code_name,
                                 "__module__": "rkv"})


# The values and names of rkv::Code and rkv::CodeName (status.h, common/status.cc).
NotFound = _subclass("NotFound", 1, "NOT_FOUND",
                     "The key is absent (get returns None and delete False instead of raising).")
TableFull = _subclass("TableFull", 2, "TABLE_FULL",
                      "The server's table (index or value heap) has no room.")
TooLarge = _subclass("TooLarge", 3, "TOO_LARGE",
                     "The key or value exceeds the server's advertised limits.")
BadRequest = _subclass("BadRequest", 4, "BAD_REQUEST", "The server rejected a malformed request.")
InvalidArgument = _subclass("InvalidArgument", 5, "INVALID_ARGUMENT",
                            "A caller error detected locally: an empty or oversized key, a bad "
                            "option, a closed Client.")
ConnectionLost = _subclass("ConnectionLost", 6, "CONNECTION_LOST",
                           "The QP failed or the server disconnected; call reconnect().")
ServerRestarted = _subclass("ServerRestarted", 7, "SERVER_RESTARTED",
                            "A reconnect found a new server instance (its table contents are "
                            "lost); a write's outcome is unknown or it was not sent.")
RetriesExhausted = _subclass("RetriesExhausted", 8, "RETRIES_EXHAUSTED",
                             "A GET kept seeing torn or changing entries past max_get_retries.")
IoError = _subclass("IoError", 9, "IO_ERROR",
                    "A verbs, rdma_cm or system call failed; the message has the details.")
ProtocolError = _subclass("ProtocolError", 10, "PROTOCOL_ERROR",
                          "The peer sent something that violates the wire format.")
Timeout = _subclass("Timeout", 11, "TIMEOUT", "No answer in time (connect or RPC timeout).")
ParamMismatch = _subclass("ParamMismatch", 12, "PARAM_MISMATCH",
                          "Connection parameters break an RDMA rule; the message names it.")
Unauthenticated = _subclass("Unauthenticated", 13, "UNAUTHENTICATED",
                            "The server requires a token this client did not prove (none or a "
                            "wrong one), or the server did not prove the client's token back.")
Busy = _subclass("Busy", 14, "BUSY",
                 "The server refused the connection for a limit; try again later.")
Moved = _subclass("Moved", 15, "MOVED",
                  "Cluster: the server asked does not own the key's slot (the client follows "
                  "this by itself; seen only past the deadline).")
TryAgain = _subclass("TryAgain", 16, "TRY_AGAIN",
                     "Cluster: the key's slot is being handed over; try again.")
Unavailable = _subclass("Unavailable", 17, "UNAVAILABLE",
                        "Cluster: no server can serve the key's slot now (unassigned, or its "
                        "server is down).")

# code (int) -> exception class.
CODES = {cls.code: cls for cls in (
    NotFound, TableFull, TooLarge, BadRequest, InvalidArgument, ConnectionLost, ServerRestarted,
    RetriesExhausted, IoError, ProtocolError, Timeout, ParamMismatch, Unauthenticated, Busy,
    Moved, TryAgain, Unavailable)}


def _from_status(code, code_name, message):
    """The exception for an rkv::Status (called by the extension; an unknown code gives Error)."""
    return CODES.get(code, Error)(message, code, code_name)
