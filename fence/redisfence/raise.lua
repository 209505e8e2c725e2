-- raise.lua: raise one resource's high-water mark without recording an operation (fence on acquire).
-- KEYS[1] high-water hash <ns>:fence:{<resource>}:hw   token, owner, updated_us (never expires)
-- ARGV[1] token (decimal uint64 without leading zeros)
-- ARGV[2] owner
-- Reply: {1, token, owner}                  accepted: the mark is now (token, owner)
--        {0, stored_token, stored_owner}    stale: nothing changed
--        error 'FENCEDQ <reason>'           KEYS[1] holds another type than a hash, or a token that is not a
--                                           decimal uint64 (or no token beside an owner): nothing changed
local function cmp(a, b) -- decimal strings without leading zeros
  if #a ~= #b then
    if #a < #b then return -1 end
    return 1
  end
  if a == b then return 0 end
  if a < b then return -1 end
  return 1
end
-- mark reports whether v is a token as the store writes it (see apply.lua).
local function mark(v)
  if not v or not string.match(v, '^[1-9]%d*$') then return false end
  return #v < 20 or (#v == 20 and v <= '18446744073709551615')
end
local hw = redis.pcall('HMGET', KEYS[1], 'token', 'owner')
if hw.err then return redis.error_reply('FENCEDQ store key ' .. KEYS[1] .. ' is not a hash') end
if (hw[1] or hw[2]) and not mark(hw[1]) then
  return redis.error_reply('FENCEDQ store key ' .. KEYS[1] .. ' holds a token that is not a decimal uint64')
end
if hw[1] then
  local c = cmp(ARGV[1], hw[1])
  if c < 0 or (c == 0 and ARGV[2] ~= hw[2]) then
    return {0, hw[1], hw[2] or ''}
  end
end
local t = redis.call('TIME')
local now = string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2]))
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'owner', ARGV[2], 'updated_us', now)
return {1, ARGV[1], ARGV[2]}
