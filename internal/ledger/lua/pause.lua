-- pause.lua: an operator pauses or resumes the queue. Claims skip a paused
-- queue; running attempts go on; enqueues are still accepted.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 'pause' or 'resume'   3 actor   4 note
-- Reply: 1 when the queue's state changed, 0 when it already was so.
local changed
if ARGV[2] == 'pause' then
  changed = redis.call('SET', pausedk, cjson.encode({actor = ARGV[3], note = ARGV[4], at = fmt(now)}), 'NX')
  changed = changed and 1 or 0
else
  changed = redis.call('DEL', pausedk)
  if changed == 1 then redis.call('SET', idlek, '1'); wake() end
end
if changed == 1 then event({type = ARGV[2], actor = ARGV[3], note = ARGV[4]}) end
return changed
