# Included by the C++ routes' Makefiles (after OBJ and the default target):
# builds the shared JSON code and protocol plumbing into $(OBJ).
COMMON_DIR := $(dir $(lastword $(MAKEFILE_LIST)))
COMMON_CXXFLAGS = -std=c++17 -Wall -Wextra $(CXXFLAGS)
COMMON_OBJS = $(OBJ)/json.o $(OBJ)/common.o

$(OBJ)/json.o: $(COMMON_DIR)json.cpp $(COMMON_DIR)json.h
	@mkdir -p $(OBJ)
	$(CXX) $(COMMON_CXXFLAGS) -c $< -o $@

$(OBJ)/common.o: $(COMMON_DIR)route.cpp $(COMMON_DIR)route.h $(COMMON_DIR)json.h
	@mkdir -p $(OBJ)
	$(CXX) $(COMMON_CXXFLAGS) -c $< -o $@
