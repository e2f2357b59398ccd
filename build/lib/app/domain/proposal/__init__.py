"""Every rule about one action proposal, as pure functions over plain values.

* `identity`: ids, digest material and the new proposal's columns (ID-1..3, PREP-8);
* `delivery`: for each event, the move, the columns it sets and what the row must
  still hold (DLV, RCPT, RTRY, WAIT-2, COMP, APPR-3, EDGE-3..5);
* `ports`: the workflow port a proposal answers and what a waiting run does (WAIT-1);
* `makers`: who may never approve it (FOUR-1, APPR-4) and the approval verdict;
* `offers`: which operator actions are open to whom, in which state.

Services load a row, turn it into these values, call a function here, and write
the answer through `move_proposal`.
"""
