// SPDX-License-Identifier: Apache-2.0
// ReadSecretFile: the checks every secret file of rkv passes before it is read (the auth token
// file, auth::LoadTokenFile; the etcd password file, EtcdMailbox::ReadPasswordFile), so that
// both are held to the same rules (docs/security.md, "The token file"):
//   - its parent directory is not writable by group or others unless it has the sticky bit
//     (else someone else could replace the file);
//   - it is opened with O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC relative to that directory (a
//     symbolic link is refused, a FIFO does not block) and every check is made on the opened
//     descriptor (fstat): a regular file, owned by the effective user, no access for group or
//     others (mode & 077 == 0);
//   - at most max_bytes bytes (larger is refused).
// Errors are Code::kInvalidArgument and start with `what` (e.g. "auth token file /etc/t"); they
// name the call and the errno text, and say how to fix the file ("chmod 600", "its directory",
// "owned by uid", "symbolic link", "not a regular file"). Bytes read and then refused are wiped
// (OPENSSL_cleanse). Thread safety: pure apart from the file system.
#ifndef RKV_COMMON_SECRET_FILE_H_
#define RKV_COMMON_SECRET_FILE_H_

#include <cstddef>
#include <string>

#include "rkv/status.h"

namespace rkv {

[[nodiscard]] Status ReadSecretFile(const std::string& path, const std::string& what,
                                    size_t max_bytes, std::string* data);

}  // namespace rkv

#endif  // RKV_COMMON_SECRET_FILE_H_
