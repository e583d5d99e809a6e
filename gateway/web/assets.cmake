# The web chat page's files, embedded into the gateway at build time (no CDN,
# nothing fetched at run time), included from gateway/CMakeLists.txt:
#   - the page itself: gateway/web/*.html, *.css, *.mjs, *.svg, served at /web/NAME;
#   - the well-kept libraries it renders model text with, from Debian's
#     packages, served at /web/lib/NAME (KaTeX's fonts at /web/lib/fonts/NAME,
#     where katex.min.css looks for them):
#       marked 4.2.3 (libjs-marked)           Markdown with GFM tables
#       DOMPurify 2.4.1 (node-dompurify)       sanitising the HTML
#       highlight.js 9.18.5 (libjs-highlight.js) code highlighting
#       KaTeX 0.16.4 (libjs-katex, fonts-katex) math, its CSS and woff2 fonts
#     About 1.5 MB in all, highlight.js's 190 languages most of it (Debian
#     ships no smaller build); KaTeX's woff2 fonts only (260 KB): every current
#     browser reads woff2, the first format katex.min.css lists, so it never
#     asks for the woff and ttf copies listed after it.
# Each library file is looked up at configure time (K3_WEB_LIB_<NAME> in the
# cache, overridable); a missing one stops configure naming its package.
# Two generated sources, so that editing the page does not recompile the
# libraries: web_page_assets.cpp and web_library_assets.cpp
# (gateway/http/web_assets.h).

# k3_web_library(VAR SERVED_NAME PACKAGE DIR...): the path of SERVED_NAME's
# file (its own name) in one of DIRs, into the cache variable VAR.
function(k3_web_library var name package)
  find_file(${var} NAMES ${name} PATHS ${ARGN} NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH
            DOC "The web page's ${name} (Debian package ${package})")
  if(NOT ${var} OR NOT EXISTS "${${var}}")
    message(FATAL_ERROR "The web chat page needs ${name} from the Debian package ${package} "
                        "(looked in ${ARGN}): apt-get install ${package} "
                        "(deploy/install-deps.sh installs every dependency), or set -D${var}=PATH")
  endif()
endfunction()

k3_web_library(K3_WEB_LIB_MARKED marked.min.js libjs-marked /usr/share/javascript/marked)
k3_web_library(K3_WEB_LIB_DOMPURIFY purify.min.js node-dompurify /usr/share/nodejs/dompurify/dist
               /usr/share/javascript/dompurify)
k3_web_library(K3_WEB_LIB_HIGHLIGHT highlight.min.js libjs-highlight.js /usr/share/javascript/highlight.js)
k3_web_library(K3_WEB_LIB_KATEX katex.min.js libjs-katex /usr/share/javascript/katex)
k3_web_library(K3_WEB_LIB_KATEX_CSS katex.min.css libjs-katex /usr/share/javascript/katex)
get_filename_component(k3_katex_dir ${K3_WEB_LIB_KATEX_CSS} DIRECTORY)
file(GLOB K3_WEB_KATEX_FONTS ${k3_katex_dir}/fonts/KaTeX_*.woff2)
list(LENGTH K3_WEB_KATEX_FONTS k3_katex_font_count)
if(k3_katex_font_count LESS 20)
  message(FATAL_ERROR "The web chat page needs KaTeX's 20 woff2 fonts in ${k3_katex_dir}/fonts "
                      "(found ${k3_katex_font_count}): apt-get install fonts-katex libjs-katex")
endif()

# "name|path" lines for embed.cmake.
set(k3_web_library_list "")
foreach(f ${K3_WEB_LIB_MARKED} ${K3_WEB_LIB_DOMPURIFY} ${K3_WEB_LIB_HIGHLIGHT} ${K3_WEB_LIB_KATEX}
          ${K3_WEB_LIB_KATEX_CSS})
  get_filename_component(n ${f} NAME)
  string(APPEND k3_web_library_list "lib/${n}|${f}\n")
endforeach()
foreach(f ${K3_WEB_KATEX_FONTS})
  get_filename_component(n ${f} NAME)
  string(APPEND k3_web_library_list "lib/fonts/${n}|${f}\n")
endforeach()
set(K3_WEB_LIBRARY_FILES ${K3_WEB_LIB_MARKED} ${K3_WEB_LIB_DOMPURIFY} ${K3_WEB_LIB_HIGHLIGHT}
                         ${K3_WEB_LIB_KATEX} ${K3_WEB_LIB_KATEX_CSS} ${K3_WEB_KATEX_FONTS})

file(GLOB K3_WEB_FILES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/web/*.html
     ${CMAKE_CURRENT_SOURCE_DIR}/web/*.css ${CMAKE_CURRENT_SOURCE_DIR}/web/*.mjs
     ${CMAKE_CURRENT_SOURCE_DIR}/web/*.svg)
set(k3_web_page_list "")
foreach(f ${K3_WEB_FILES})
  get_filename_component(n ${f} NAME)
  string(APPEND k3_web_page_list "${n}|${f}\n")
endforeach()

file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/web_page_assets.list CONTENT "${k3_web_page_list}")
file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/web_library_assets.list
     CONTENT "${k3_web_library_list}")

foreach(part page library)
  if(part STREQUAL "page")
    set(deps ${K3_WEB_FILES})
  else()
    set(deps ${K3_WEB_LIBRARY_FILES})
  endif()
  add_custom_command(
    OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/web_${part}_assets.cpp
    COMMAND ${CMAKE_COMMAND} -DLIST=${CMAKE_CURRENT_BINARY_DIR}/web_${part}_assets.list
            -DFUNCTION=web_${part}_assets -DOUT=${CMAKE_CURRENT_BINARY_DIR}/web_${part}_assets.cpp
            -P ${CMAKE_CURRENT_SOURCE_DIR}/web/embed.cmake
    DEPENDS ${deps} ${CMAKE_CURRENT_BINARY_DIR}/web_${part}_assets.list
            ${CMAKE_CURRENT_SOURCE_DIR}/web/embed.cmake
    COMMENT "Embedding the web chat page's ${part} files")
endforeach()
set(K3_WEB_ASSET_SRCS ${CMAKE_CURRENT_BINARY_DIR}/web_page_assets.cpp
                      ${CMAKE_CURRENT_BINARY_DIR}/web_library_assets.cpp)
