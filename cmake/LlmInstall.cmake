include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS llmrt llmrt_static EXPORT llmrtTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES include/llm.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT llmrtTargets NAMESPACE llmrt:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/llmrt)
configure_package_config_file(cmake/llmrtConfig.cmake.in
  ${PROJECT_BINARY_DIR}/llmrtConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/llmrt)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/llmrtConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/llmrtConfig.cmake ${PROJECT_BINARY_DIR}/llmrtConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/llmrt)
configure_file(cmake/llmrt.pc.in ${PROJECT_BINARY_DIR}/llmrt.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/llmrt.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
