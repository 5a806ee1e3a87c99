package sqlite

// uploadTurn hands the upload calls' write transactions (accepts, cancels,
// the processor's claims and applies) their turn at the write connection
// one at a time, first come first served (a turn, as the order calls have
// one of their own).
//
// The write pool alone hands its one connection to a random waiter
// (database/sql). With dozens of uploads arriving at once the processor,
// one waiter among them, got the connection about once in as many
// hand-overs: it applied a fiftieth of what was accepted and its backlog
// grew without bound. In turn, it waits for the accepts that came before
// it, and then applies, in one batch, what they left waiting: the longer
// the line, the larger its batches (worker.DefaultBatch bounds them), so it
// keeps up with any rate of small uploads the accepts reach. And an accept
// waits for those before it, not for any number that came after.
//
// The holder of the turn still takes the connection from the write pool,
// where it meets the writers that are not upload calls (order calls, the
// deliverer's rounds), a few at most.
//
// A cancel of an upload still waiting goes ahead of the line (takeAhead,
// BeginAhead): sent while an apply holds the turn, it is made before the
// claim, asked earlier, that would pick its upload up as soon as the apply
// commits. Only cancels of uploads read as accepted go ahead, at most one
// per upload, so the line behind them moves on.
type uploadTurn = turn
