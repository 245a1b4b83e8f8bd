# Doxygen INPUT_FILTER body (docs/api/doxygen_filter.sh). The headers document declarations with
# plain "//" comments, often one comment for a run of overloads:
#     // self + other. On bool inputs add is logical or.
#     Tensor add(const Tensor& self, const Tensor& other);
#     Tensor add(const Tensor& self, const Scalar& other);
# Doxygen reads only "///" and gives a comment to one declaration. This filter makes a comment
# directly above code a doc comment, wraps the comment and the declarations that follow it (up
# to a blank line, the next comment or a closing brace) in a member group, which
# DISTRIBUTE_GROUP_DOC documents with the comment, and makes a trailing "// ..." after a
# declaration a "///< ...". A comment followed by a blank line (a section heading) stays plain.
function flush_plain(   i) { for (i = 1; i <= n; i++) print pending[i]; n = 0 }
function flush_doc(   i, s) {
  for (i = 1; i <= n; i++) { s = pending[i]; sub(/\/\//, "///", s); print s }
  n = 0
}
function close_group() { if (in_group) { print "/// @}"; in_group = 0 } }
{
  line = $0
  if (line ~ /^[ \t]*\/\/ ----/) { close_group(); flush_plain(); print line; next }  # a ruler
  if (line ~ /^[ \t]*\/\/[^\/]/ || line ~ /^[ \t]*\/\/$/) {   # a plain comment line
    close_group()
    pending[++n] = line
    next
  }
  if (line ~ /^[ \t]*$/) { close_group(); flush_plain(); print line; next }
  if (line ~ /^[ \t]*}/ || line ~ /^[ \t]*#/ || line ~ /^[ \t]*(public|private|protected):/) {
    close_group(); flush_plain(); print line; next
  }
  # A trailing comment after code documents that line's declaration.
  if (line ~ /^[^"\/]*[;,{)][ \t]*\/\/ /) sub(/[ \t]*\/\/ /, " ///< ", line)
  if (n > 0) {
    # Open a group only for declarations, not for a scope (class, struct, enum, namespace).
    opens_scope = (line ~ /\{[ \t]*$/ || line ~ /^[ \t]*(class|struct|enum|namespace|union)[ \t]/)
    if (!opens_scope && !in_group) { print "/// @{"; in_group = 1 }
    flush_doc()
  }
  print line
}
END { close_group(); flush_plain() }
