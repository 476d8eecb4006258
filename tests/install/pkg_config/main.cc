// SPDX-License-Identifier: Apache-2.0
// An outside program that uses the installed rkv client library (tests/install/install_test.sh,
// debs_test.sh): builds an rkv::Options, connects to the address given as argv[1] and prints the
// status. Where nothing listens the connect fails quickly; exit 0 when a status was printed.
#include <rkv/client.h>

#include <iostream>
#include <memory>

int main(int argc, char** argv) {
  const char* address = argc > 1 ? argv[1] : "127.0.0.1:1";
  rkv::Options options;
  options.connect_timeout_ms = 2000;
  std::unique_ptr<rkv::Client> client;
  rkv::Status s = rkv::Client::Connect(address, options, &client);
  std::cout << "connect " << address << ": " << s.ToString() << " (" << rkv::CodeName(s.code())
            << ")\n";
  return s.ok() || !s.message().empty() ? 0 : 1;
}
