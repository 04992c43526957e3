-- ARGV: 1 prefix, 2 token, 3 next_seq, 4 next_cluster, 5 id_kind, 6 layout, 7 d_docs, 8 d_reps, 9 max_seq,
--   10 band rows to remove (16-byte records key8 seq8), 11 / 12 cluster members to remove / add
--   (24-byte records bucket8 field8 seq8), 13 band rows to add to keys that may exist (key8 seq8,
--   sorted by key), 14 documents to remove ([u32 id length][seq8][id]...), 15 rows of the new band
--   keys (written by the MSETNX that follows the script in the same MULTI/EXEC).
-- The script does the part of a commit that reads before it writes; the bulk (new band keys,
-- documents, ids) follows it in the same MULTI/EXEC as plain MSETNX / MSET / HSET, so that it never
-- passes through Lua (Lua copies every argument into a Lua string and back, which made a batch's
-- commit markedly slower on the server). The lease holds when the lock carries our token, or when it
-- expired and no other writer has even asked for it since (the fence counter is still ours: nobody
-- else can have committed in between); RedisStorage._commit checks it under WATCH before EXEC, the
-- script again inside.
-- Multimap fields (clusters): the value is a string of seq8s; mm_add / mm_del add or remove one seq8.
local function mm_has(v, m)
  for i = 1, #v, 8 do if string.sub(v, i, i + 7) == m then return true end end
  return false
end
local function mm_add(h, f, m)
  if redis.call('HSETNX', h, f, m) == 1 then return 1 end  -- the common case: a new field
  local v = redis.call('HGET', h, f)
  if mm_has(v, m) then return 0 end
  redis.call('HSET', h, f, v .. m)
  return 1
end
local function mm_del(h, f, m)
  local v = redis.call('HGET', h, f)
  if not v then return 0 end
  for i = 1, #v, 8 do
    if string.sub(v, i, i + 7) == m then
      local rest = string.sub(v, 1, i - 1) .. string.sub(v, i + 8)
      if #rest == 0 then redis.call('HDEL', h, f) else redis.call('HSET', h, f, rest) end
      return 1
    end
  end
  return 0
end

local p = ARGV[1]
local lock = redis.call('GET', p .. 'lock')
if lock ~= ARGV[2] and not (lock == false and redis.call('GET', p .. 'fence') == ARGV[2]) then
  return redis.error_reply('DVF_LEASE_LOST')
end
local sub = string.sub
local band_rows = 0
local pb = p .. 'b:'
local blob = ARGV[10]
for j = 1, #blob, 16 do
  local k, m = pb .. sub(blob, j, j + 7), sub(blob, j + 8, j + 15)
  local v = redis.call('GET', k)
  if v then
    for x = 1, #v, 8 do
      if sub(v, x, x + 7) == m then
        local rest = sub(v, 1, x - 1) .. sub(v, x + 8)
        if #rest == 0 then redis.call('DEL', k) else redis.call('SET', k, rest) end
        band_rows = band_rows - 1
        break
      end
    end
  end
end
local function each(blob, tag, fn)
  local base = p .. tag
  for i = 1, #blob, 24 do fn(base .. sub(blob, i, i + 7), sub(blob, i + 8, i + 15), sub(blob, i + 16, i + 23)) end
end
each(ARGV[11], 'c:', mm_del)
each(ARGV[12], 'c:', mm_add)
local function append(k, add)
  local v = redis.call('GET', k) or ''
  for y = 1, #add, 8 do
    local m = sub(add, y, y + 7)
    if not mm_has(v, m) then v = v .. m band_rows = band_rows + 1 end
  end
  redis.call('SET', k, v)
end
blob = ARGV[13]
local j = 1
while j <= #blob do
  local k = sub(blob, j, j + 7)
  local e = j + 16
  while e <= #blob and sub(blob, e, e + 7) == k do e = e + 16 end
  local parts = {}
  for x = j, e - 1, 16 do parts[#parts + 1] = sub(blob, x + 8, x + 15) end
  append(pb .. k, table.concat(parts))
  j = e
end
local ids = p .. 'ids'
blob = ARGV[14]
local pos = 1
while pos <= #blob do
  local n
  n, pos = struct.unpack('<I4', blob, pos)
  local s, id = sub(blob, pos, pos + 7), sub(blob, pos + 8, pos + 7 + n)
  pos = pos + 8 + n
  redis.call('DEL', p .. 'd:' .. s)
  if redis.call('HGET', ids, id) == s then redis.call('HDEL', ids, id) end
end
band_rows = band_rows + tonumber(ARGV[15])  -- the new keys' rows: MSETNX after this script
local st = p .. 'state'
redis.call('HSET', st, 'next_seq', ARGV[3], 'next_cluster', ARGV[4], 'id_kind', ARGV[5], 'layout', ARGV[6],
           'last_commit', ARGV[2])
redis.call('HINCRBY', st, 'docs', ARGV[7])
redis.call('HINCRBY', st, 'reps', ARGV[8])
redis.call('HINCRBY', st, 'band_rows', band_rows)
if tonumber(ARGV[9]) > tonumber(redis.call('HGET', st, 'max_seq') or '-1') then
  redis.call('HSET', st, 'max_seq', ARGV[9])
end
redis.call('DEL', p .. 'lock')
redis.call('INCR', p .. 'fence')  -- a late renewal of this token can no longer take the lock back
return band_rows
