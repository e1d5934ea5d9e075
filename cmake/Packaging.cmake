# Install rules and the Debian package (CPack), for labs that install one
# build on every machine instead of building on each (README, "Installing on
# the machines of a lab").
#
#   cmake --install build [--prefix DIR]    bin/smolcluster, bin/smolctl, the
#                                           .desktop entry, icon, lessons, docs
#   cd build && cpack                       build/smolcluster_<version>_<arch>.deb
#   scripts/setup --package                 both executables, then the .deb
#
# The executables carry no path into the source or build tree: the lessons
# are compiled in (:/lessons), Fashion-MNIST is read from Debian's
# dataset-fashion-mnist path, the gpt's corpus from base-files, and LibTorch
# and Qt resolve from the system library directories (no RPATH is needed,
# and CMake drops the build RPATH on install).
include(GNUInstallDirs)

# The executables' install() lines are in app/CMakeLists.txt.
# qt_standard_project_setup() gives them an install RPATH of $ORIGIN/../lib;
# they link no library of ours (all static), and Qt and LibTorch are in the
# system library directories, so the installed files carry none.
set_target_properties(smolctl smolcluster PROPERTIES INSTALL_RPATH "")
install(FILES ${PROJECT_SOURCE_DIR}/resources/smolcluster.desktop
        DESTINATION ${CMAKE_INSTALL_DATADIR}/applications)
install(FILES ${PROJECT_SOURCE_DIR}/resources/icons/smolcluster.svg
        DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps)
# The shipped lessons are compiled in; these copies are for a teacher to read
# and adapt: `smolctl lesson /usr/share/smolcluster/lessons/zero.lesson --check`.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/resources/lessons/
        DESTINATION ${CMAKE_INSTALL_DATADIR}/smolcluster/lessons
        FILES_MATCHING PATTERN "*.lesson")
# README.md beside docs/, so its relative links and images still resolve.
install(FILES ${PROJECT_SOURCE_DIR}/README.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs
        FILES_MATCHING PATTERN "*.md" PATTERN "*.png")

# One Debian package, smolcluster_<version>_<arch>.deb, installed under /usr.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME smolcluster)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "smolcluster")
set(CPACK_PACKAGE_CONTACT "smolcluster maintainers <smolcluster@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "small, transparent distributed-training cluster with a teaching window")
set(CPACK_PACKAGE_DESCRIPTION
    "smolcluster trains a small LibTorch model on a cluster of nodes that talk
over plain TCP, and shows every node's memory, shards and packets. smolctl
runs it headless and joins a machine to a cluster (smolctl node --join).")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Without their debug info the executables are ~5x smaller to copy around.
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
# Library dependencies from the executables' NEEDED entries (dpkg-shlibdeps,
# from dpkg-dev, which build-essential brings), plus what is loaded at run
# time rather than linked: the SQLite driver of Qt Sql (sessions) and the
# data of the default mlp run.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libqt6sql6-sqlite, dataset-fashion-mnist")
# Debian's libtorch calls BLAS through the libblas.so.3 alternative; serial
# OpenBLAS makes its matmuls ~20x faster than the reference BLAS.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libopenblas0-pthread")
include(CPack)
