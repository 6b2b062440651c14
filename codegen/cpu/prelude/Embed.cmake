# cmake -DOUTPUT=FILE -DPARTS="A.h;B.h;..." -P Embed.cmake
#
# Writes FILE: the C++ raw string literal kilnc starts every generated
# kernel file with, made of each part's text below its "// kiln prelude
# text" line, in the order given. The lines above that line (the file's
# comment, #pragma once, the include of the part before) are for compiling
# the part as C++ in the build, not for the generated code.
set(marker "// kiln prelude text\n")
set(text "")
foreach(part IN LISTS PARTS)
  file(READ "${part}" content)
  string(FIND "${content}" "${marker}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${part}: no '// kiln prelude text' line")
  endif()
  string(LENGTH "${marker}" skip)
  math(EXPR at "${at} + ${skip}")
  string(SUBSTRING "${content}" ${at} -1 content)
  string(APPEND text "${content}")
endforeach()
string(FIND "${text}" ")kiln_prelude\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "the prelude contains the raw string's delimiter")
endif()
set(literal "R\"kiln_prelude(${text})kiln_prelude\"\n")
# Rewrite only on change, so that kilnc relinks only when the prelude did.
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
  if(old STREQUAL literal)
    return()
  endif()
endif()
file(WRITE "${OUTPUT}" "${literal}")
