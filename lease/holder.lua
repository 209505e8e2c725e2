-- holder.lua: read the live lease on one resource.
-- KEYS[1] lease key <ns>:lease:{<resource>} = "<token> <deadline_us> <owner>"
-- Reply: {owner, token, deadline_us} of a live lease, or {} when free.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local v = redis.call('GET', KEYS[1])
if not v then return {} end
local htok, hdl, howner = string.match(v, '^(%d+) (%d+) (.*)$')
if not hdl or tonumber(hdl) <= now then return {} end
return {howner, htok, hdl}
