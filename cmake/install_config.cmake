# Run by `cmake --install` (cmake/install.cmake): the configuration and the systemd units, for the
# prefix installed to. /usr puts the configuration in /etc (as GNUInstallDirs does), any other
# prefix in PREFIX/etc; the units name PREFIX/bin/arbiter and that configuration. file(INSTALL)
# puts DESTDIR in front, as for every other file.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(SYSCONFDIR /etc)
else()
  set(SYSCONFDIR "${CMAKE_INSTALL_PREFIX}/etc")
endif()
set(BINDIR "${CMAKE_INSTALL_PREFIX}/bin")
set(DOCDIR "${CMAKE_INSTALL_PREFIX}/share/doc/arbiter")
# A folder per destination, so that installs to two places at once do not share the files.
string(MD5 destination "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
set(units "${ARBITER_BINARY_DIR}/units/${destination}")
foreach(unit IN ITEMS arbiter-server.service arbiter-agent.service)
  configure_file("${ARBITER_SOURCE_DIR}/packaging/systemd/${unit}.in" "${units}/${unit}" @ONLY)
  file(INSTALL "${units}/${unit}" DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
endforeach()
file(INSTALL "${ARBITER_SOURCE_DIR}/packaging/etc/cluster.yaml"
     DESTINATION "${SYSCONFDIR}/arbiter")
file(INSTALL "${ARBITER_SOURCE_DIR}/packaging/default/arbiter-server"
             "${ARBITER_SOURCE_DIR}/packaging/default/arbiter-agent"
     DESTINATION "${SYSCONFDIR}/default")
