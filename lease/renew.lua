-- renew.lua: extend a live lease held by the caller's token.
-- KEYS[1] lease key <ns>:lease:{<resource>} = "<token> <deadline_us> <owner>"
-- KEYS[2] the namespace's epoch record <ns>:epoch, which keeps its time (epoch_now;
--         on Redis Cluster the resource's own <ns>:lease:{<resource>}:clock; absent, plain
--         TIME, when epochs are off)
-- ARGV[1] owner
-- ARGV[2] token
-- ARGV[3] ttl in milliseconds
-- Reply: {1, deadline_us} when renewed; {0, reason} when lost, reason one of
--        "expired" (no live holder), "released" (the caller's token was released) or
--        "superseded" (another token holds it, or raised the key past it).
local now = epoch_now(KEYS[2])
local v = redis.call('GET', KEYS[1])
if not v then
  return {0, 'expired'}
end
local htok, hdl, howner = string.match(v, '^(%d+) (%d+) (.*)$')
if htok ~= ARGV[2] or howner ~= ARGV[1] then
  if htok == ARGV[2] and howner == '' then return {0, 'released'} end
  return {0, 'superseded'}
end
if tonumber(hdl) <= now then
  return {0, 'expired'}
end
local sdl = string.format('%d', now + tonumber(ARGV[3]) * 1000)
redis.call('SET', KEYS[1], htok .. ' ' .. sdl .. ' ' .. howner)
return {1, sdl}
