-- CSV logs of a run (RFC 4180): metrics.csv, weights.csv, alignments.csv, epochs.csv.
--
-- Writing: a field is quoted when it holds a comma, a double quote, CR or LF (quotes doubled
-- inside); records end with CRLF as RFC 4180 says (pandas, gnuplot and spreadsheets all read
-- it). Numbers are written with %.9g so float32 values survive a round trip exactly and a
-- resumed run writes byte-identical rows.
--
-- Reading (for resume and plots): a small RFC 4180 parser (quoted fields with embedded
-- commas, quotes and newlines; CRLF or LF record ends) that parses every input or names the
-- file and line where it cannot.
--
--   local csvlog = require "util.csvlog"
--   local log = csvlog.open(dir .. "/metrics.csv", {"step", "loss"})   -- writes the header
--   log:write{step = 10, loss = 2.5}      -- by column name (missing -> empty field)
--   log:write_list{10, 2.5}               -- positional
--   log:close()
--   local header, rows = csvlog.read(path)  -- rows: lists of strings
--   csvlog.truncate_after(path, "step", 500) -- drop rows whose step > 500 (resume)
local runinfo = require "util.runinfo"

local M = {}

local function format_field(v)
    local t = type(v)
    local s
    if v == nil then
        s = ""
    elseif t == "number" then
        if math.type(v) == "integer" then
            s = string.format("%d", v)
        elseif v ~= v then
            s = "nan"
        elseif v == math.huge then
            s = "inf"
        elseif v == -math.huge then
            s = "-inf"
        elseif v == math.floor(v) and math.abs(v) < 2^53 then
            s = string.format("%d", math.tointeger(v))
        else
            s = string.format("%.9g", v)
        end
    elseif t == "boolean" then
        s = v and "true" or "false"
    else
        s = tostring(v)
    end
    if s:find('[,"\r\n]') then s = '"' .. s:gsub('"', '""') .. '"' end
    return s
end
M.format_field = format_field

-- One record (list of values) as a CSV line with its CRLF terminator.
function M.format_record(values, n)
    local out = {}
    for i = 1, n or #values do out[i] = format_field(values[i]) end
    return table.concat(out, ",") .. "\r\n"
end

-- Parses CSV text into a list of records (lists of strings) and the line each record starts
-- on. Total: every input either parses or raises "<name>:<line>: <what>" (name defaults to
-- "csv"). Besides RFC 4180 it accepts LF alone as a record end; it refuses a CR not followed
-- by LF and a quote inside an unquoted field or after a closing quote, instead of guessing.
function M.parse(text, name)
    local records, lines, record, field = {}, {}, {}, {}
    local i, n, line = 1, #text, 1
    local in_quotes, at_field_start, after_quote, any = false, true, false, false
    local record_line, quote_line = 1, 1
    local function fail(msg, at_line)
        error(string.format("%s:%d: %s", name or "csv", at_line or line, msg), 0)
    end
    local function end_field()
        record[#record + 1] = table.concat(field)
        field = {}
        at_field_start, after_quote = true, false
    end
    local function end_record()
        end_field()
        records[#records + 1] = record
        lines[#lines + 1] = record_line
        record = {}
        any = false
    end
    while i <= n do
        local c = text:sub(i, i)
        if in_quotes then
            if c == '"' then
                if text:sub(i + 1, i + 1) == '"' then
                    field[#field + 1] = '"'
                    i = i + 1
                else
                    in_quotes, after_quote = false, true
                end
            else
                -- Copy a run of ordinary characters at once (line counts the newlines in it).
                local j = text:find('"', i, true) or (n + 1)
                local run = text:sub(i, j - 1)
                field[#field + 1] = run
                for _ in run:gmatch("\n") do line = line + 1 end
                i = j - 1
            end
        elseif c == "," then
            end_field()
            any = true
        elseif c == "\r" then
            if text:sub(i + 1, i + 1) ~= "\n" then fail("carriage return not followed by a line feed") end
            end_record()
            i = i + 1
            line = line + 1
            record_line = line
        elseif c == "\n" then
            end_record()
            line = line + 1
            record_line = line
        elseif after_quote then
            fail(string.format("%q after the closing quote of a field (expected a comma or the end of the record)", c))
        elseif c == '"' then
            if not at_field_start then fail("quote inside an unquoted field (quote the whole field)") end
            in_quotes, at_field_start, any, quote_line = true, false, true, line
        else
            -- i <= j - 1: c itself is none of the stop characters, so the scan always advances.
            local j = text:find('[,"\r\n]', i) or (n + 1)
            field[#field + 1] = text:sub(i, j - 1)
            at_field_start, any = false, true
            i = j - 1
        end
        i = i + 1
    end
    if in_quotes then fail("quoted field not closed before the end of the input", quote_line) end
    if any or #field > 0 or #record > 0 then end_record() end
    return records, lines
end

local read_all = runinfo.read_file

-- header (list of names), rows (lists of strings), index (name -> column number).
-- Missing file: nil, message.
function M.read(path)
    local text, err = read_all(path)
    if not text then return nil, err end
    local ok, records, lines = pcall(M.parse, text, path)
    if not ok then error(records, 2) end
    local header = table.remove(records, 1) or {}
    local index = {}
    for j, name in ipairs(header) do index[name] = j end
    for r, rec in ipairs(records) do
        if #rec ~= #header then
            error(string.format("%s:%d: expected %d fields, found %d", path, lines[r + 1],
                                #header, #rec), 2)
        end
    end
    return header, records, index
end

-- Rows as tables keyed by column name, numbers converted where they parse.
function M.read_records(path)
    local header, rows, index = M.read(path)
    if not header then return nil, rows end
    local out = {}
    for r, row in ipairs(rows) do
        local rec = {}
        for j, name in ipairs(header) do rec[name] = tonumber(row[j]) or row[j] end
        out[r] = rec
    end
    return out, header, index
end

local write_atomic = runinfo.write_atomic

-- Keeps the header and the rows whose `column` value is <= limit (resume: rows written after
-- the checkpoint step are dropped). A process killed while writing may leave a partial last
-- record: text after the last record terminator is dropped, and so is any record with the
-- wrong number of fields. A missing file is left missing. Returns the number of rows kept.
function M.truncate_after(path, column, limit)
    local text = read_all(path)
    if not text then return 0 end
    local last = 0
    for pos in text:gmatch("()\n") do last = pos end
    text = text:sub(1, last)
    local ok, records = pcall(M.parse, text, path)
    if not ok then error(records, 2) end
    local header = table.remove(records, 1)
    if not header then return 0 end
    local j
    for i, name in ipairs(header) do if name == column then j = i end end
    if not j then error(path .. ": no column '" .. column .. "'", 2) end
    local out = {M.format_record(header)}
    local kept = 0
    for _, row in ipairs(records) do
        local v = tonumber(row[j])
        if #row == #header and v and v <= limit then
            out[#out + 1] = M.format_record(row)
            kept = kept + 1
        end
    end
    write_atomic(path, table.concat(out))
    return kept
end

local Log = {}
Log.__index = Log

-- A failed write or flush (a full disk) is an error naming the file: a log that silently
-- loses rows cannot be resumed from.
local function checked(path, ok, err)
    if not ok then error(string.format("%s: cannot write: %s", path, tostring(err)), 3) end
end

-- Opens a log with the given columns. mode "w" (default) truncates and writes the header;
-- mode "a" appends, and checks that an existing header equals `columns` (a resumed run must
-- log the same columns) — an empty or missing file gets the header.
function M.open(path, columns, mode)
    mode = mode or "w"
    assert(type(columns) == "table" and #columns > 0, "csvlog.open: columns must be a non-empty list")
    local need_header = true
    if mode == "a" then
        local header = M.read(path)
        if header and #header > 0 then
            if table.concat(header, "\0") ~= table.concat(columns, "\0") then
                error(string.format("%s: existing header (%s) differs from the columns to log (%s)",
                                    path, table.concat(header, ","), table.concat(columns, ",")), 2)
            end
            need_header = false
        end
    end
    local f, err = io.open(path, mode == "a" and "ab" or "wb")
    if not f then error("csvlog: cannot open " .. tostring(err), 2) end
    local ok, werr = true, nil
    if need_header then ok, werr = f:write(M.format_record(columns)) end
    if ok then ok, werr = f:flush() end
    if not ok then
        f:close()
        checked(path, nil, werr)
    end
    return setmetatable({path = path, file = f, columns = columns}, Log)
end

-- Writes one record given as {column = value}; unknown keys are an error (a typo would
-- otherwise silently drop a value).
function Log:write(rec)
    local vals = {}
    local known = self.known
    if not known then
        known = {}
        for j, c in ipairs(self.columns) do known[c] = j end
        self.known = known
    end
    for key in pairs(rec) do
        if not known[key] then
            error(string.format("%s: no column '%s'", self.path, tostring(key)), 2)
        end
    end
    for j, c in ipairs(self.columns) do vals[j] = rec[c] end
    checked(self.path, self.file:write(M.format_record(vals, #self.columns)))
end

function Log:write_list(values)
    if #values ~= #self.columns then
        error(string.format("%s: %d values for %d columns", self.path, #values, #self.columns), 2)
    end
    checked(self.path, self.file:write(M.format_record(values)))
end

function Log:flush()
    if self.file then checked(self.path, self.file:flush()) end
end

-- Closes the file (idempotent); a failure to write the last bytes is an error unless
-- `quiet` (closing after another error, or from the garbage collector).
function Log:close(quiet)
    if self.file then
        local f = self.file
        self.file = nil
        local ok, err = f:close()
        if not quiet then checked(self.path, ok, err) end
    end
end
Log.__close = function(self) self:close(true) end
Log.__gc = Log.__close

return M
