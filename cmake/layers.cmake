# The layers of the library, from the bottom up (docs/architecture.md "Layers"): a layer's
# sources are the .c files of its folders; it sees (includes the private headers of) only the
# layers it names in _SEES, which are all below it. CMakeLists.txt builds one object library per
# layer from this table, with exactly those include directories; tests/layers/check_layers.py
# reads the same table (cmake -P prints it) to check that no object calls a function of a layer
# it may not see.
#
#   core      foundation and the common model           sees nothing
#   io        sources, cursor, atomic output            core
#   quant     dtype kernels                             core
#   access    reading, validation, the writer           core io quant
#   fmt_*     one driver per format folder              core io quant
#   formats   the registry of drivers                   core quant + every fmt_*
#   models    what a model is to a runtime -> plans     core io quant access formats
#   convert   the engine that carries out plans         core io quant access formats models
#   api       the façade                                everything
# The format folders: every directory under src/formats/ is one driver's layer (fmt_<folder>),
# found here, so a new format is its folder plus its row in src/formats/registry.h.
file(GLOB _tbx_fmt_dirs LIST_DIRECTORIES true CONFIGURE_DEPENDS
     "${CMAKE_CURRENT_LIST_DIR}/../src/formats/*")
set(TBX_FORMATS "")
foreach(_d IN LISTS _tbx_fmt_dirs)
  if(IS_DIRECTORY "${_d}")
    get_filename_component(_f "${_d}" NAME)
    list(APPEND TBX_FORMATS ${_f})
  endif()
endforeach()
list(SORT TBX_FORMATS)

set(TBX_LAYER_core_DIRS src/core)
set(TBX_LAYER_core_SEES "")
set(TBX_LAYER_io_DIRS src/io)
set(TBX_LAYER_io_SEES core)
set(TBX_LAYER_quant_DIRS src/quant)
set(TBX_LAYER_quant_SEES core)
set(TBX_LAYER_access_DIRS src/access)
set(TBX_LAYER_access_SEES core io quant)
set(TBX_FORMAT_LAYERS "")
foreach(_f IN LISTS TBX_FORMATS)
  set(TBX_LAYER_fmt_${_f}_DIRS src/formats/${_f})
  set(TBX_LAYER_fmt_${_f}_SEES core io quant)
  list(APPEND TBX_FORMAT_LAYERS fmt_${_f})
endforeach()
set(TBX_LAYER_formats_DIRS src/formats)
set(TBX_LAYER_formats_SEES core quant ${TBX_FORMAT_LAYERS})
set(TBX_LAYER_models_DIRS src/models)
set(TBX_LAYER_models_SEES core io quant access formats)
set(TBX_LAYER_convert_DIRS src/convert)
set(TBX_LAYER_convert_SEES core io quant access formats models)
set(TBX_LAYER_api_DIRS src/api)
set(TBX_LAYER_api_SEES core io quant access ${TBX_FORMAT_LAYERS} formats models convert)

set(TBX_LAYERS core io quant access ${TBX_FORMAT_LAYERS} formats models convert api)

# Calls that still run against the table, each "layer:symbol" (the check names them as
# temporary; anything else fails it): none left (issue 20 removed the last, the EMBD writer's
# use of the models layer's tokenizer.json walker: the Hugging Face -> EMBD import is
# src/models/hf_embd.c).
set(TBX_LAYER_TEMP_ALLOW "")
