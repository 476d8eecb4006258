// SPDX-License-Identifier: Apache-2.0
// Printable: text that came from a peer (an error message in an exchange record, rdma_cm
// reject data, an etcd response), made safe for a log line or a Status message: printable
// ASCII is kept, every other byte (newlines, escape sequences, NUL, UTF-8) and the backslash
// itself become \xNN, so a peer cannot forge log lines or terminal control sequences. At most
// `max` bytes of the input are used; "..." marks a cut.
// Bounds: the result is at most 4 * max + 3 bytes. Thread safety: pure function.
#ifndef RKV_COMMON_PRINTABLE_H_
#define RKV_COMMON_PRINTABLE_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace rkv {

inline constexpr size_t kPrintableDefaultMax = 200;

std::string Printable(std::string_view text, size_t max = kPrintableDefaultMax);

}  // namespace rkv

#endif  // RKV_COMMON_PRINTABLE_H_
