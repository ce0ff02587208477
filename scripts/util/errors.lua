-- Error values for the user's mistakes, which dgalua reports as one line without a traceback
-- (bindings/dgalua_main.c; DGA_TRACEBACK=1 or --debug shows it):
--   errors.usage(msg)   a command-line mistake (--set, --policy, an option's value): the
--                       sweep stops before any run, dgalua exits with status 2;
--   errors.user(msg)    user code that failed (a policy, an experiment descriptor): the sweep
--                       stops at once rather than fail every cell the same way; exit status 1.
-- Both are tables with `msg` and a __tostring; errors.is(e) tells them from other errors.
local M = {}

local function make(kind, msg)
    return setmetatable({usage = kind == "usage" or nil, user = kind == "user" or nil, msg = msg},
                        {__tostring = function(e) return e.msg end})
end

function M.usage(msg) return make("usage", msg) end
function M.user(msg) return make("user", msg) end
function M.is(e) return type(e) == "table" and (e.usage or e.user) and true or false end

return M
