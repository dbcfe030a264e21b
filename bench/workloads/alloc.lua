-- bench/workloads/alloc.lua [SCALE] - an allocation-heavy, deterministic Lua
-- program for the malloc suite (Lua allocates every table and string with
-- realloc): tables of records, string building and gsub, sorting, a churning
-- cache. What it prints depends on SCALE only.
local scale = tonumber(arg[1] or "1")
local n = math.max(1, math.floor(300000 * scale))
local seed = 42
local function rnd() seed = (seed * 1103515245 + 12345) % 2147483648; return seed end
local words = {}
for i = 0, 4095 do
  local t = {}
  for j = 1, 3 + i % 9 do t[j] = string.char(97 + rnd() % 26) end
  words[i] = table.concat(t)
end
local check = 0
local groups = {}
for i = 1, n do
  local w = words[rnd() % 4096]
  local g = groups[w]
  if not g then g = {}; groups[w] = g end
  g[#g + 1] = { id = i, v = rnd() % 1000, tag = w .. "-" .. i }
end
local keys = {}
for k in pairs(groups) do keys[#keys + 1] = k end
table.sort(keys)
for _, k in ipairs(keys) do
  local s = 0
  for _, r in ipairs(groups[k]) do s = s + r.v end
  check = (check * 31 + s + #groups[k]) % 1000000007
end
groups = nil
collectgarbage()
local lines = {}
for i = 1, n // 4 do
  local t = {}
  for j = 1, 12 do t[j] = words[rnd() % 4096] end
  local l = table.concat(t, " "):gsub("([aeiou])(%a)", "%2%1")
  lines[i] = l
end
local count = {}
for _, l in ipairs(lines) do
  for w in l:gmatch("%a+") do count[w] = (count[w] or 0) + 1 end
end
local text = table.concat(lines, "\n")
check = (check + #text) % 1000000007
local cache, order, head = {}, {}, 1
for i = 1, n do
  local k = rnd() % (n // 2 + 1)
  if not cache[k] then
    cache[k] = string.rep("x", 16 + k % 200)
    order[#order + 1] = k
    if #order - head + 1 > 5000 then cache[order[head]] = nil; order[head] = nil; head = head + 1 end
  end
  check = (check + #(cache[k] or "")) % 1000000007
end
local nk = 0
for _ in pairs(count) do nk = nk + 1 end
print("check", check, nk)
