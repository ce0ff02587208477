-- luacheck configuration: `make lint` (luacheck scripts experiments tests bench).
std = "lua54"
color = false
-- dgalua makes the C module a global; scripts fall back to require "dga" under plain Lua.
read_globals = {"dga"}
max_line_length = 140
-- `not (x > 0)` is how the numeric checks reject NaN along with the out-of-range values.
ignore = {"581"}
-- Unused arguments document an interface (policy methods, callbacks); a leading _ marks
-- the other deliberately unused values.
unused_args = false

files["tests/lua"] = {std = "+busted"}
files["tests/interop"] = {std = "+busted"}
