# SPDX-License-Identifier: Apache-2.0
# Manual pages (issue 22): kvserver(1), kvctl(1) and kvbench(1), rendered at build time by
# help2man from each program's --help and --version (common/cli/usage.h), so a page always lists
# the flags the program has. Installed under share/man/man1 by `cmake --install` and shipped in
# the Debian packages; tests/man/man_pages_test.sh fails when a flag is missing from a page.
# RKV_MAN=OFF builds no page (a machine without help2man); the install test then fails.
option(RKV_MAN "Build the manual pages with help2man" ON)
if(NOT RKV_MAN)
  return()
endif()
find_program(RKV_HELP2MAN help2man)
if(NOT RKV_HELP2MAN)
  message(FATAL_ERROR "help2man not found: apt-get install help2man (tools/setup-deps does), "
                      "or configure with -DRKV_MAN=OFF to build no manual page")
endif()
set(RKV_MAN_NAME_kvserver "serve an rkv key-value table over RDMA")
set(RKV_MAN_NAME_kvctl "get, put, delete and inspect the keys of an rkv server")
set(RKV_MAN_NAME_kvbench "YCSB-like load generator for rkv")
set(RKV_MAN_PAGES "")
foreach(tool kvserver kvctl kvbench)
  set(page ${CMAKE_BINARY_DIR}/man/${tool}.1)
  # --help and --version write to stdout only and return before glog or any device is set up.
  add_custom_command(
    OUTPUT ${page}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
    COMMAND ${RKV_HELP2MAN} --no-info --section=1 --source=rkv
            "--name=${RKV_MAN_NAME_${tool}}" --output=${page} $<TARGET_FILE:${tool}>
    DEPENDS ${tool}
    COMMENT "help2man: ${tool}.1"
    VERBATIM)
  list(APPEND RKV_MAN_PAGES ${page})
endforeach()
add_custom_target(man_pages ALL DEPENDS ${RKV_MAN_PAGES})
install(FILES ${RKV_MAN_PAGES} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
