# MixcheckCases.cmake — one CTest per mixcheck case, so `ctest -R`, `ctest -L` and `ctest -j` select and
# spread cases. Installed with the package (find_package(mixcheck) includes it) and used in this tree
# (tests/cases).
#
#   mixcheck_add_case_tests(CASES path...            case files, or folders searched for *.yaml and *.yml
#                                                    (folders named tolerances are skipped, and so are
#                                                    folders named long unless ARGS has --long)
#                           [MIXCHECK exe]           default: MIXCHECK_EXECUTABLE, else the target
#                                                    mixcheck::mixcheck or mixcheck
#                           [PREFIX p]               test names are <p><case id> (default "mixcheck.")
#                           [LABELS l...]            added to the labels "mixcheck" and the case's family
#                           [ARGS a...]              more `mixcheck run` options (--plugin, --backend, ...;
#                                                    not --json, which each test sets itself)
#                           [WORKING_DIRECTORY d]    default: the current source folder
#                           [TIMEOUT s]              default 600
#                           [ALLOW_NOT_TESTED])      the summary test passes with cases not tested
#
# Each test runs `mixcheck run <case file> ARGS --json <its report>`: exit 0 passes; 1 (a check failed)
# and 2 (a usage or input error: a backend name mistyped in ARGS, a plugin that does not load, a bad
# case) fail; 125 (could not test: a backend the case names is missing, or a backend under test ran no
# check, every one unsupported or not scheduled) is a skipped test, with mixcheck's reason in its output.
# Two more tests frame the case tests as CTest fixtures, so they run with any selection of them (ctest -R,
# -L): <p>cases-start first (clears the folder of the reports), <p>not-tested last: it prints how many of
# the cases that ran were not tested, each with mixcheck's first reason, and fails when there is one
# (unless ALLOW_NOT_TESTED), so that ctest's summary does not read "100% tests passed" over cases that
# tested nothing. The case id and family are read from the file's top-level `id:` and `family:` lines.
#
# The same file run as a script is those two tests:
#   cmake -DMC_CASES_RESET=DIR -P MixcheckCases.cmake                    empties DIR
#   cmake -DMC_CASES_SUMMARY=DIR [-DMC_ALLOW_NOT_TESTED=ON] -P MixcheckCases.cmake

if(CMAKE_SCRIPT_MODE_FILE AND DEFINED MC_CASES_RESET)
  file(REMOVE_RECURSE "${MC_CASES_RESET}")
  file(MAKE_DIRECTORY "${MC_CASES_RESET}")
  return()
endif()

if(CMAKE_SCRIPT_MODE_FILE AND DEFINED MC_CASES_SUMMARY)
  file(GLOB reports "${MC_CASES_SUMMARY}/*.json")
  list(SORT reports)
  list(LENGTH reports n_run)
  set(n_not_tested 0)
  set(lines "")
  foreach(r ${reports})
    get_filename_component(id "${r}" NAME_WE)
    file(READ "${r}" text)
    string(JSON code ERROR_VARIABLE jerr GET "${text}" summary exit_code)
    if(jerr)
      message(FATAL_ERROR "mixcheck cases: ${r}: not a mixcheck report (${jerr})")
    endif()
    if(code EQUAL 125)
      math(EXPR n_not_tested "${n_not_tested} + 1")
      set(why "every check unsupported")
      string(JSON n_problems ERROR_VARIABLE jerr LENGTH "${text}" problems)
      if(NOT jerr AND n_problems GREATER 0)
        string(JSON why ERROR_VARIABLE jerr GET "${text}" problems 0 message)
      endif()
      string(APPEND lines "\n  ${id}: ${why}")
    endif()
  endforeach()
  if(n_not_tested GREATER 0)
    set(msg "mixcheck cases: ${n_not_tested} of the ${n_run} case(s) run were not tested (exit 125, shown as skipped):${lines}")
    message("${msg}")
    if(MC_ALLOW_NOT_TESTED)
      message("(allowed: ALLOW_NOT_TESTED)")
    else()
      message(FATAL_ERROR "mixcheck cases: ${n_not_tested} case(s) not tested")
    endif()
  else()
    message("mixcheck cases: all ${n_run} case(s) run were tested")
  endif()
  return()
endif()

function(mixcheck_add_case_tests)
  cmake_parse_arguments(MC "ALLOW_NOT_TESTED" "MIXCHECK;PREFIX;WORKING_DIRECTORY;TIMEOUT" "CASES;LABELS;ARGS" ${ARGN})
  if(NOT MC_CASES)
    message(FATAL_ERROR "mixcheck_add_case_tests: CASES is required")
  endif()
  if(NOT MC_MIXCHECK)
    if(MIXCHECK_EXECUTABLE)
      set(MC_MIXCHECK ${MIXCHECK_EXECUTABLE})
    elseif(TARGET mixcheck::mixcheck)
      set(MC_MIXCHECK $<TARGET_FILE:mixcheck::mixcheck>)
    elseif(TARGET mixcheck)
      set(MC_MIXCHECK $<TARGET_FILE:mixcheck>)
    else()
      message(FATAL_ERROR "mixcheck_add_case_tests: no mixcheck command (give MIXCHECK, or find_package(mixcheck))")
    endif()
  endif()
  if(NOT DEFINED MC_PREFIX)
    set(MC_PREFIX "mixcheck.")
  endif()
  if(NOT MC_WORKING_DIRECTORY)
    set(MC_WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
  endif()
  if(NOT MC_TIMEOUT)
    set(MC_TIMEOUT 600)
  endif()
  set(skip "(^|/)tolerances/")
  if(NOT "--long" IN_LIST MC_ARGS)
    set(skip "(^|/)(tolerances|long)/")
  endif()
  set(files "")
  foreach(p ${MC_CASES})
    if(NOT IS_ABSOLUTE "${p}")
      set(p ${CMAKE_CURRENT_SOURCE_DIR}/${p})
    endif()
    if(IS_DIRECTORY "${p}")
      file(GLOB_RECURSE found CONFIGURE_DEPENDS "${p}/*.yaml" "${p}/*.yml")
      foreach(f ${found})
        file(RELATIVE_PATH rel "${p}" "${f}")
        if(NOT rel MATCHES "${skip}")
          list(APPEND files "${f}")
        endif()
      endforeach()
    elseif(EXISTS "${p}")
      list(APPEND files "${p}")
    else()
      message(FATAL_ERROR "mixcheck_add_case_tests: ${p} does not exist")
    endif()
  endforeach()
  list(SORT files)
  string(MAKE_C_IDENTIFIER "${MC_PREFIX}" tag)
  set(fixture mixcheck_cases_${tag})
  set(reports ${CMAKE_CURRENT_BINARY_DIR}/mixcheck-cases/${tag})
  set(start ${MC_PREFIX}cases-start)
  set(summary ${MC_PREFIX}not-tested)
  if(NOT TEST ${start})
    add_test(NAME ${start} COMMAND ${CMAKE_COMMAND} -DMC_CASES_RESET=${reports} -P ${CMAKE_CURRENT_FUNCTION_LIST_FILE})
    set(allow "")
    if(MC_ALLOW_NOT_TESTED)
      set(allow -DMC_ALLOW_NOT_TESTED=ON)
    endif()
    add_test(NAME ${summary}
             COMMAND ${CMAKE_COMMAND} -DMC_CASES_SUMMARY=${reports} ${allow} -P ${CMAKE_CURRENT_FUNCTION_LIST_FILE})
    set_tests_properties(${start} PROPERTIES FIXTURES_SETUP ${fixture} LABELS "mixcheck;${MC_LABELS}")
    set_tests_properties(${summary} PROPERTIES FIXTURES_CLEANUP ${fixture} LABELS "mixcheck;${MC_LABELS}")
  endif()
  foreach(f ${files})
    file(STRINGS "${f}" id_line REGEX "^id:[ \t]*[^ \t]")
    file(STRINGS "${f}" family_line REGEX "^family:[ \t]*[^ \t]")
    if(NOT id_line)
      message(FATAL_ERROR "mixcheck_add_case_tests: ${f} has no top-level 'id:' line")
    endif()
    string(REGEX REPLACE "^id:[ \t]*([^ \t#]+).*" "\\1" id "${id_line}")
    string(REGEX REPLACE "^family:[ \t]*([^ \t#]+).*" "\\1" family "${family_line}")
    set(name ${MC_PREFIX}${id})
    add_test(NAME ${name} COMMAND ${MC_MIXCHECK} run ${f} ${MC_ARGS} --json ${reports}/${id}.json
             WORKING_DIRECTORY ${MC_WORKING_DIRECTORY})
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 125 TIMEOUT ${MC_TIMEOUT} FIXTURES_REQUIRED ${fixture}
                                            LABELS "mixcheck;${family};${MC_LABELS}")
  endforeach()
endfunction()
