#!/usr/bin/env bash
# Doxygen INPUT_FILTER (docs/api/Doxyfile): turns the headers' plain "//" declaration comments
# into Doxygen documentation on the fly (see doxygen_filter.awk), so the sources keep one
# comment style.
exec awk -f "$(dirname "$0")/doxygen_filter.awk" "$1"
