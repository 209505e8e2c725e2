-- acquire.lua: take a free (or expired) lease on one resource and mint its token.
-- KEYS[1] lease key <ns>:lease:{<resource>} = "<token> <deadline_us> <owner>"; never expires:
--         it keeps the last token minted after the lease ends
-- ARGV[1] owner
-- ARGV[2] ttl in milliseconds
-- Reply: {1, owner, token, deadline_us} when acquired,
--        {0, holder_owner, holder_token, holder_deadline_us} when held by a live lease.
-- Token = max(last + 1, Redis TIME in microseconds), so tokens keep rising
-- even after a restart that lost the key. Deadlines come from Redis TIME.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local stored = 0
local v = redis.call('GET', KEYS[1])
if v then
  local htok, hdl, howner = string.match(v, '^(%d+) (%d+) (.*)$')
  if hdl and tonumber(hdl) > now then
    return {0, howner, htok, hdl}
  end
  stored = tonumber(htok) or 0
end
local tok = stored + 1
if now > tok then tok = now end
local stok = string.format('%d', tok)
local sdl = string.format('%d', now + tonumber(ARGV[2]) * 1000)
redis.call('SET', KEYS[1], stok .. ' ' .. sdl .. ' ' .. ARGV[1])
return {1, ARGV[1], stok, sdl}
