# SPDX-License-Identifier: Apache-2.0
# Installation (issue 13; docs/install.md): kvserver, kvctl, kvbench; the client library as
# librkv.so.1 (SONAME, exporting only the public API: cmake/librkv.map) and as librkv.a (the
# client plus the internal libraries it needs, so one archive is enough); the public headers;
# the CMake package rkv (targets rkv::rkv and rkv::rkv_static) and rkv.pc.
#
# The in-tree static target `rkv` stays as it is for the build's own programs and tests. Both
# installed libraries are made of the same objects (every library is position independent).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(RKV_CLIENT_OBJECTS $<TARGET_OBJECTS:rkv> $<TARGET_OBJECTS:rkv_verbs>
                       $<TARGET_OBJECTS:rkv_exchange> $<TARGET_OBJECTS:rkv_cluster>
                       $<TARGET_OBJECTS:rkv_common>)
# System libraries of those objects, by link name (for librkv.a users, rkv.pc, Debian).
set(RKV_STATIC_SYSTEM_LIBS ibverbs rdmacm xxhash glog)

add_library(rkv_shared SHARED ${RKV_CLIENT_OBJECTS})
set_target_properties(rkv_shared PROPERTIES OUTPUT_NAME rkv VERSION ${PROJECT_VERSION}
                      SOVERSION ${PROJECT_VERSION_MAJOR} EXPORT_NAME rkv
                      LINK_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/librkv.map)
target_link_options(rkv_shared PRIVATE -Wl,--no-undefined
                    -Wl,--version-script=${CMAKE_CURRENT_LIST_DIR}/librkv.map)
target_link_libraries(rkv_shared PRIVATE ${RKV_STATIC_SYSTEM_LIBS} CURL::libcurl OpenSSL::Crypto
                      Threads::Threads)
target_include_directories(rkv_shared INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

# Installed as librkv.a; built in its own directory so it does not clash with the in-tree rkv.
add_library(rkv_static STATIC ${RKV_CLIENT_OBJECTS})
set_target_properties(rkv_static PROPERTIES OUTPUT_NAME rkv EXPORT_NAME rkv_static
                      ARCHIVE_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/install-lib)
target_link_libraries(rkv_static INTERFACE ${RKV_STATIC_SYSTEM_LIBS} CURL::libcurl OpenSSL::Crypto
                      Threads::Threads)
target_include_directories(rkv_static INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

install(TARGETS kvserver kvctl kvbench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
include(${CMAKE_CURRENT_LIST_DIR}/rkv_man.cmake)
install(TARGETS rkv_shared EXPORT rkvTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS rkv_static EXPORT rkvStaticTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/client/include/rkv
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")

set(RKV_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/rkv)
install(EXPORT rkvTargets NAMESPACE rkv:: DESTINATION ${RKV_CMAKE_DIR})
install(EXPORT rkvStaticTargets NAMESPACE rkv:: DESTINATION ${RKV_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/rkvConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/rkvConfig.cmake INSTALL_DESTINATION ${RKV_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/rkvConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/rkvConfig.cmake ${CMAKE_BINARY_DIR}/rkvConfigVersion.cmake
        DESTINATION ${RKV_CMAKE_DIR})

# rkv.pc is written at install time so that its prefix is the one installed to
# (cmake --install --prefix P), not the one configured.
set(RKV_PC_IN ${CMAKE_CURRENT_LIST_DIR}/rkv.pc.in)
set(RKV_PC_OUT ${CMAKE_BINARY_DIR}/rkv.pc)
install(CODE "
  set(RKV_PC_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(RKV_PC_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(RKV_PC_VERSION \"${PROJECT_VERSION}\")
  set(RKV_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${RKV_PC_IN}\" \"${RKV_PC_OUT}\" @ONLY)
")
install(FILES ${RKV_PC_OUT} DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# RKV_BUILD_TESTS=OFF (the Debian package build): test-only programs are not built by default.
if(NOT RKV_BUILD_TESTS)
  set_target_properties(unit_tests integration_test raw_client lin_load lincheck rkv_lincheck
                        PROPERTIES EXCLUDE_FROM_ALL ON)
endif()
