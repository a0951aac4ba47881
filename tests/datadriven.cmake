# gpushare_data_test(<name> SOURCES ... LIBS ... SUITE <suite> DATA <dir under tests/testdata>)
# Builds a data-driven GoogleTest binary (tests/datadriven.h, docs/testing.md) and registers one
# ctest test per data file, named <suite>/<file>. The files are globbed when the build runs, so a
# new file is picked up by the next build without recompiling anything. Each test must report
# exactly one passed GoogleTest: a filter that matched nothing would otherwise pass.
include_guard(GLOBAL)

function(gpushare_data_test name)
  cmake_parse_arguments(T "" "SUITE;DATA" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES} ${CMAKE_SOURCE_DIR}/tests/datadriven.cc)
  target_link_libraries(${name} PRIVATE ${T_LIBS} gpushare_base GTest::gtest GTest::gtest_main Threads::Threads)
  target_compile_definitions(${name} PRIVATE GPUSHARE_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  # Pure translators: the unit tier, and the folder's label (tests/CMakeLists.txt).
  get_filename_component(folder ${CMAKE_CURRENT_SOURCE_DIR} NAME)
  file(GLOB files CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/testdata/${T_DATA}/*.txt)
  foreach(f ${files})
    get_filename_component(stem ${f} NAME_WE)
    string(REGEX REPLACE "[^A-Za-z0-9]" "_" param ${stem})  # datadriven::FileTestName
    add_test(NAME ${T_SUITE}/${stem}
             COMMAND ${name} --gtest_filter=Testdata/${T_SUITE}.File/${param})
    set_tests_properties(${T_SUITE}/${stem} PROPERTIES TIMEOUT 300
                         PASS_REGULAR_EXPRESSION "\\[  PASSED  \\] 1 test\\."
                         LABELS "unit;${folder}")
  endforeach()
endfunction()
