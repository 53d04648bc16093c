# Included by CMake before llama.cpp's own project() (CMAKE_PROJECT_llama.cpp_INCLUDE_BEFORE),
# when `make setup` builds llama-cpp-python: the Python package loads libllama and libggml
# only, so llama.cpp's common library (the CLI and server helpers, with cpp-httplib) is not
# built. llama-cpp-python's CMakeLists forces LLAMA_BUILD_COMMON on before this point.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama.cpp: build common utils library" FORCE)
