# mc_add_test(NAME SOURCES... [LABELS l...]): one cmocka executable per unit, registered with CTest.
# A test that takes over 10 s sets COST (its seconds in a -j2 run on the 2-core development machine) beside
# its definition: `ctest -j` starts the costliest first when a build has no timing history of its own (a
# fresh CI clone), so none of them begins near the end and holds the run up alone.
# Each links tests/support's library (mc_test_support: capture.h, tmpdir.h, goldenmodel.h). Tests run from the source root so that
# cases/ and golden/ paths resolve; exit 77 = "Not Run".
function(mc_add_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LABELS;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE mixcheck_core mixcheck_reference mixcheck_cpu mc_test_support
                                        PkgConfig::CMOCKA ${T_LIBS})
  target_compile_definitions(${name} PRIVATE MC_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                                             MC_BINARY_DIR="${PROJECT_BINARY_DIR}")
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
