-- apply.lua: fenced, idempotent write on one resource, in one atomic step.
-- KEYS[1]   high-water hash <ns>:fence:{<resource>}:hw          token, owner, updated_us (never expires)
-- KEYS[2]   effect hash     <ns>:fence:{<resource>}:op:<op id>   state (applied|pending), resource,
--                           operation_id, token, owner, applied_us; nonce while pending
-- KEYS[3..] data keys: KEYS[2+i] is the key of mutation i; every key is in KEYS[1]'s hash slot
-- ARGV[1] token (decimal uint64 without leading zeros)
-- ARGV[2] owner
-- ARGV[3] resource
-- ARGV[4] operation id
-- ARGV[5] mode: 'apply' records the effect as applied; 'begin' (Guard) records it as pending
-- ARGV[6] TTL of the effect hash in ms: retention for 'apply' (0: keep forever), pending TTL for 'begin'
-- ARGV[7] nonce of the pending record ('begin' only)
-- ARGV[8] number of mutations n, then for each mutation: command, argc, then argc arguments.
--         Commands: SET value | DEL | HSET field value [field value ...] | HINCRBY field delta |
--                   INCRBY delta | RPUSH value [value ...]
-- Reply: {1, token, owner}                               accepted: high-water raised, effect recorded,
--                                                        mutations applied
--        {0, stored_token, stored_owner}                 stale: nothing changed
--        {2, token, owner, applied_us, resource}         operation already applied: nothing changed
--        {3, token, owner}                               operation pending under a Guard: nothing changed
--        error 'FENCEDQ <reason>'                        a mutation cannot apply, KEYS[1] or KEYS[2]
--                                                        holds another type than a hash, or KEYS[1]
--                                                        a token that is not a decimal uint64 (or no
--                                                        token beside an owner): nothing changed
-- The fence accepts a higher token, or the same token from the same owner. Every check and
-- every mutation's precondition is read before the first write, so a rejection writes nothing.

local function cmp(a, b) -- decimal strings without leading zeros
  if #a ~= #b then
    if #a < #b then return -1 end
    return 1
  end
  if a == b then return 0 end
  if a < b then return -1 end
  return 1
end

-- i64 reads v as Redis reads an integer (INCRBY, HINCRBY): '0', or an optional '-' and digits
-- without a leading zero, within the signed 64-bit range. It returns the value as {hi, lo},
-- hi * 1e9 + lo with both of its sign (exact as Lua numbers), or nil where Redis would refuse v.
local function i64(v)
  if v == '0' then return {0, 0} end
  local neg, mag = string.match(v or '', '^(%-?)([1-9]%d*)$')
  if not mag or #mag > 19 then return nil end
  if #mag == 19 and mag > (neg == '-' and '9223372036854775808' or '9223372036854775807') then
    return nil
  end
  local hi, lo = 0, tonumber(string.sub(mag, -9))
  if #mag > 9 then hi = tonumber(string.sub(mag, 1, -10)) end
  if neg == '-' then return {-hi, -lo} end
  return {hi, lo}
end

-- fits reports whether a + b (as i64 returns them) is within the signed 64-bit range, where
-- Redis's INCRBY and HINCRBY would not refuse the sum as an overflow.
local function fits(a, b)
  local hi, lo = a[1] + b[1], a[2] + b[2]
  while lo < 0 do hi, lo = hi - 1, lo + 1e9 end
  while lo >= 1e9 do hi, lo = hi + 1, lo - 1e9 end
  -- max 9223372036 * 1e9 + 854775807; min -9223372037 * 1e9 + 145224192
  if hi > 9223372036 or (hi == 9223372036 and lo > 854775807) then return false end
  if hi < -9223372037 or (hi == -9223372037 and lo < 145224192) then return false end
  return true
end

-- mark reports whether v is a token as the store writes it: a decimal uint64 above 0 without
-- leading zeros, the form cmp compares.
local function mark(v)
  if not v or not string.match(v, '^[1-9]%d*$') then return false end
  return #v < 20 or (#v == 20 and v <= '18446744073709551615')
end

local tok, owner, resource, opid, mode = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local ttl = tonumber(ARGV[6])

-- hget is HMGET of a key the store keeps as a hash; one holding another type is refused (pcall
-- costs what call does), not failed on with a bare WRONGTYPE.
local function hget(key, ...)
  local v = redis.pcall('HMGET', key, ...)
  if v.err then return nil, redis.error_reply('FENCEDQ store key ' .. key .. ' is not a hash') end
  return v
end

-- 1. Fence. A mark whose token is not one the store writes (edited by hand) is refused: compared
-- as it is, it could let a lower token pass.
local hw, err = hget(KEYS[1], 'token', 'owner')
if err then return err end
if (hw[1] or hw[2]) and not mark(hw[1]) then
  return redis.error_reply('FENCEDQ store key ' .. KEYS[1] .. ' holds a token that is not a decimal uint64')
end
if hw[1] then
  local c = cmp(tok, hw[1])
  if c < 0 or (c == 0 and owner ~= hw[2]) then
    return {0, hw[1], hw[2] or ''}
  end
end

-- 2. Effect log.
local rec, err2 = hget(KEYS[2], 'state', 'token', 'owner', 'applied_us', 'resource')
if err2 then return err2 end
if rec[1] == 'applied' then
  return {2, rec[2] or '', rec[3] or '', rec[4] or '', rec[5] or ''}
elseif rec[1] == 'pending' then
  return {3, rec[2] or '', rec[3] or ''}
end

-- 3. Parse mutations and check their preconditions.
local muts = {}
local p = 9
local n = tonumber(ARGV[8])
for i = 1, n do
  local cmd, argc = ARGV[p], tonumber(ARGV[p + 1])
  local args = {}
  for j = 1, argc do args[j] = ARGV[p + 1 + j] end
  p = p + 2 + argc
  local key = KEYS[2 + i]
  local t = redis.call('TYPE', key)['ok']
  if cmd == 'SET' or cmd == 'DEL' then
    -- any type
  elseif cmd == 'INCRBY' then
    if t ~= 'none' and t ~= 'string' then return redis.error_reply('FENCEDQ INCRBY on ' .. t .. ' key ' .. key) end
    local cur = {0, 0}
    if t == 'string' then cur = i64(redis.call('GET', key)) end
    if not cur then
      return redis.error_reply('FENCEDQ INCRBY on non-integer value at ' .. key)
    end
    local d = i64(args[1])
    if not d or not fits(cur, d) then
      return redis.error_reply('FENCEDQ INCRBY would overflow at ' .. key)
    end
  elseif cmd == 'HSET' then
    if t ~= 'none' and t ~= 'hash' then return redis.error_reply('FENCEDQ HSET on ' .. t .. ' key ' .. key) end
  elseif cmd == 'HINCRBY' then
    if t ~= 'none' and t ~= 'hash' then return redis.error_reply('FENCEDQ HINCRBY on ' .. t .. ' key ' .. key) end
    local v = redis.call('HGET', key, args[1])
    local cur = {0, 0}
    if v then cur = i64(v) end
    if not cur then
      return redis.error_reply('FENCEDQ HINCRBY on non-integer field ' .. args[1] .. ' at ' .. key)
    end
    local d = i64(args[2])
    if not d or not fits(cur, d) then
      return redis.error_reply('FENCEDQ HINCRBY would overflow field ' .. args[1] .. ' at ' .. key)
    end
  elseif cmd == 'RPUSH' then
    if t ~= 'none' and t ~= 'list' then return redis.error_reply('FENCEDQ RPUSH on ' .. t .. ' key ' .. key) end
  else
    return redis.error_reply('FENCEDQ unsupported mutation ' .. tostring(cmd))
  end
  muts[i] = {cmd, key, args}
end

-- 4. Write: high-water mark, effect record, mutations.
local t = redis.call('TIME')
local now = string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2]))
redis.call('HSET', KEYS[1], 'token', tok, 'owner', owner, 'updated_us', now)
if mode == 'begin' then
  redis.call('HSET', KEYS[2], 'state', 'pending', 'resource', resource, 'operation_id', opid,
    'token', tok, 'owner', owner, 'nonce', ARGV[7])
  redis.call('PEXPIRE', KEYS[2], ttl)
else
  redis.call('HSET', KEYS[2], 'state', 'applied', 'resource', resource, 'operation_id', opid,
    'token', tok, 'owner', owner, 'applied_us', now)
  if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
end
for i = 1, #muts do
  local cmd, key, args = muts[i][1], muts[i][2], muts[i][3]
  if cmd == 'SET' then
    redis.call('SET', key, args[1])
  elseif cmd == 'DEL' then
    redis.call('DEL', key)
  elseif cmd == 'HSET' then
    redis.call('HSET', key, unpack(args))
  elseif cmd == 'HINCRBY' then
    redis.call('HINCRBY', key, args[1], args[2])
  elseif cmd == 'INCRBY' then
    redis.call('INCRBY', key, args[1])
  elseif cmd == 'RPUSH' then
    redis.call('RPUSH', key, unpack(args))
  end
end
return {1, tok, owner}
