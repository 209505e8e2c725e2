-- acquire.lua: take a free (or expired) lease on one resource and mint its token.
-- Prepended with internal/epoch's lib.lua (epoch_check, token_mint).
-- KEYS[1] lease key <ns>:lease:{<resource>} = "<token> <deadline_us> <owner>"; never expires:
--         it keeps the last token minted after the lease ends
-- KEYS[2] the namespace's epoch record <ns>:epoch; on Redis Cluster the resource's own
--         <ns>:lease:{<resource>}:clock (absent when epochs are off)
-- ARGV[1] owner
-- ARGV[2] ttl in milliseconds
-- ARGV[3] replication id of the primary the caller's epoch is for ('' when epochs are off,
--         '@node' on Redis Cluster: this master decides, see lib.lua's epoch_node)
-- ARGV[4] the caller's epoch
-- Reply: {1, owner, token, deadline_us} when acquired,
--        {0, holder_owner, holder_token, holder_deadline_us} when held by a live lease,
--        {-1, replication id, recorded epoch} when the caller must refresh its epoch (nothing written).
-- Token = max(last + 1, (epoch << 52) + Redis TIME in µs): every token minted after a
-- failover is above every token minted before it, whatever this node's clock says.
-- Deadlines are in the namespace's time (epoch_now: Redis TIME plus the primary tenure's
-- offset, kept in the epoch record), so a deadline an earlier primary wrote is read on
-- the clock it was written with.
local now, rec = epoch_now(KEYS[2], ARGV[3]) -- rec: the epoch recorded for ARGV[3], read with the time
local last
local v = redis.call('GET', KEYS[1])
if v then
  local htok, hdl, howner = string.match(v, '^(%d+) (%d+) (.*)$')
  if hdl and tonumber(hdl) > now then
    return {0, howner, htok, hdl}
  end
  last = htok
end
local ep, stale = epoch_check(KEYS[2], ARGV[3], ARGV[4], rec)
if not ep then return {-1, stale[1], stale[2]} end
local stok = token_mint(last, ep, now)
local sdl = string.format('%d', now + tonumber(ARGV[2]) * 1000)
redis.call('SET', KEYS[1], stok .. ' ' .. sdl .. ' ' .. ARGV[1])
return {1, ARGV[1], stok, sdl}
