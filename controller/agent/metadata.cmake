# controller/agent/metadata.cmake: the interruption-notice pollers
# (metadata.h), two libraries of their own so the agent's CMakeLists only
# links them:
#   tm_agent_metadata_parse  the pure parsers (cJSON, core): the fuzz target
#                            and the parser unit test link this alone
#   tm_agent_metadata        the watches on the loop (http_uv), and the
#                            node's address lookup (address.h)
# The agent's own library must leave metadata*.c out of its glob (or list
# its sources with ONLY), or these objects would be built twice.
set(TM_MD_DIR ${CMAKE_CURRENT_LIST_DIR})
tm_layer(tm_agent_metadata_parse ONLY SOURCES ${TM_MD_DIR}/metadata_parse.c
         LINKS tarmac_core PkgConfig::CJSON)
# Every metadata_*.c but the parsers: the watch, the address lookup and
# one reader per cloud (metadata_KIND.c), so a new cloud's reader needs no
# line here.
file(GLOB TM_MD_SOURCES CONFIGURE_DEPENDS ${TM_MD_DIR}/metadata*.c)
list(FILTER TM_MD_SOURCES EXCLUDE REGEX "/metadata_parse\\.c$")
tm_layer(tm_agent_metadata ONLY SOURCES ${TM_MD_SOURCES}
         LINKS tm_agent_metadata_parse tarmac_io tarmac_core PkgConfig::UV)
