# What `cmake --install` installs and what `make package` packs (CPack, a Debian package;
# docs/operations.md, "Install as services"). Included at the end of CMakeLists.txt.
#
# Installed under the prefix: bin/arbiter and bin/arbiter-full (the front runs the whole program
# from its own folder), share/man/man1 (arbiter(1) and arbiter-COMMAND(1), generated at build time
# from the commands' own --help), share/doc/arbiter (README and the examples), lib/systemd/system
# (the server's and the agent's units) and lib/sysusers.d (the arbiter user). The configuration
# (cluster.yaml and the services' options) goes to /etc when the prefix is /usr, else to
# PREFIX/etc; the units name the installed program and configuration, so they are written at
# install time, for the prefix installed to (`cmake --install build --prefix DIR`, or DESTDIR).

# ---- Man pages, from the commands' own --help (help2man; scripts/manpages.sh). ----
find_program(ARBITER_HELP2MAN help2man)
set(ARBITER_MAN_DIR ${CMAKE_BINARY_DIR}/man)
if(ARBITER_HELP2MAN)
  add_custom_command(
    OUTPUT ${ARBITER_MAN_DIR}/arbiter.1.gz
    COMMAND ${CMAKE_SOURCE_DIR}/scripts/manpages.sh $<TARGET_FILE:arbiter> ${ARBITER_MAN_DIR}
    DEPENDS arbiter arbiter_full ${CMAKE_SOURCE_DIR}/scripts/manpages.sh
    COMMENT "Man pages from the commands' --help" VERBATIM)
  add_custom_target(arbiter_man ALL DEPENDS ${ARBITER_MAN_DIR}/arbiter.1.gz)
  install(DIRECTORY ${ARBITER_MAN_DIR}/ DESTINATION share/man/man1 FILES_MATCHING PATTERN "*.1.gz")
else()
  message(WARNING "help2man not found: no man pages (scripts/install-deps.sh installs it)")
endif()

# ---- The programs, the documentation, the examples. ----
install(TARGETS arbiter arbiter_full RUNTIME DESTINATION bin)
install(FILES README.md DESTINATION share/doc/arbiter)
install(FILES examples/cluster.yaml examples/jobs.yaml DESTINATION share/doc/arbiter/examples)
install(FILES packaging/sysusers.conf DESTINATION lib/sysusers.d RENAME arbiter.conf)

# ---- The configuration and the systemd units, for the prefix installed to. ----
install(CODE "set(ARBITER_SOURCE_DIR \"${CMAKE_SOURCE_DIR}\")
              set(ARBITER_BINARY_DIR \"${CMAKE_BINARY_DIR}\")")
install(SCRIPT cmake/install_config.cmake)

# ---- The Debian package: `make package` (cpack -G DEB) writes BUILD/arbiter_VERSION_ARCH.deb. ----
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME arbiter)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "GPU-cluster job scheduler: server, node agent and command")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
       "Queues with priorities and quotas, gang and topology-aware placement on mixed GPU types, "
       "backfill with reservations, and preemption that knows what a victim loses. The package "
       "has the arbiter command, systemd units for the server and the node agent, and their man "
       "pages.")
set(CPACK_PACKAGE_CONTACT "Arbiter maintainers <arbiter@localhost>")
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR})
# Installed with DESTDIR and the prefix /usr (not a prefix in the staging folder), so that the
# install script above writes the configuration to /etc and units that name /usr/bin/arbiter.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_SOURCE_DIR}/packaging/debian/postinst ${CMAKE_SOURCE_DIR}/packaging/debian/prerm
    ${CMAKE_SOURCE_DIR}/packaging/debian/postrm ${CMAKE_SOURCE_DIR}/packaging/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)

# ---- The install tree, checked (tests/install/install_test.sh; no root needed). ----
if(ARBITER_TESTS AND (NOT ARBITER_TEST_DIRS OR "cli" IN_LIST ARBITER_TEST_DIRS))
  foreach(mode IN ITEMS destdir relocated)
    add_test(NAME install_${mode}
             COMMAND ${CMAKE_SOURCE_DIR}/tests/install/install_test.sh ${CMAKE_BINARY_DIR}
                     ${PROJECT_VERSION} ${mode})
  endforeach()
  # One at a time: each install writes BUILD/install_manifest.txt.
  set_tests_properties(install_destdir install_relocated PROPERTIES RESOURCE_LOCK arbiter_install)
endif()
