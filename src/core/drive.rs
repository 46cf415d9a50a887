//! The one delivery loop of the change feeds: [`drive`] takes what a
//! reader's [`Watch`] yields, has the publisher's [`Sink`] turn each item
//! into its messages, and sends them under the publisher's
//! [`Backpressure`] rule, until the feed is over, the sink says stop, the
//! reader goes away, or the stop token is cancelled.
//!
//! Why here: D-Bus subscriptions, MCP sessions and the dashboard's events
//! each had a loop of their own, with their rule for a reader that does not
//! read written into it (issue 50). The rule is the core's decision, named
//! by the publisher ([`Sink::backpressure`]) and applied in one place; a
//! publisher only converts and formats.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::watch::{Item, Watch};

/// What happens to a reader that does not take what it is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backpressure {
    /// Wait as long as it takes (the stop token ends the wait). Falling
    /// behind meanwhile is the feed's business: it drops what the reader
    /// could not take and says so once ([`Item::Lagged`]). D-Bus: the
    /// outbox waits for the socket.
    Wait,
    /// Wait at most this long for each message; a reader that takes none
    /// in that time is disconnected ([`Ended::Stalled`]) and told nothing
    /// more. MCP: `[limits] reader_stall_s`.
    DisconnectAfter(Duration),
    /// Never wait: a message that cannot be taken at once (the reader's
    /// queue is full) cuts the reader off ([`Ended::CutOff`]). The
    /// dashboard's page re-reads itself when it reconnects.
    CutOff,
}

/// How [`drive`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The feed is over, or the sink said nothing follows.
    Over,
    /// The stop token was cancelled.
    Stopped,
    /// The reader went away ([`Sink::gone`], [`Sent::Gone`], [`Sink::closed`]).
    Gone,
    /// [`Backpressure::DisconnectAfter`]: a message waited the whole limit.
    Stalled,
    /// [`Backpressure::CutOff`]: a message could not be taken at once.
    CutOff,
}

/// Whether [`drive`] goes on after an item's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// On to the next item.
    Go,
    /// Send this item's messages, then end ([`Ended::Over`]).
    Stop,
}

/// What sending one message came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    /// Sent (or nothing to send); on to the next message.
    Delivered,
    /// Not sent, and the rest of this item's messages are dropped; on to
    /// the next item (an MCP `subscriptions/listen` stream that failed
    /// one notification).
    Dropped,
    /// The reader is gone: end ([`Ended::Gone`]).
    Gone,
}

/// What a reader's feed yields: a [`Watch`] (a unit test's fake in
/// tests).
pub(crate) trait Feed {
    /// The next item; `None` once the feed is over. Cancel-safe.
    fn next(&mut self) -> impl Future<Output = Option<Item>> + Send;
}

impl Feed for Watch {
    fn next(&mut self) -> impl Future<Output = Option<Item>> + Send {
        Watch::next(self)
    }
}

/// A publisher's side of [`drive`]: what an item is on its wire, and how
/// one message goes out. It decides nothing about a slow reader: it names
/// its rule ([`Sink::backpressure`]) and [`drive`] applies it.
pub(crate) trait Sink {
    /// One message on the publisher's wire.
    type Msg;

    /// The rule for a reader that does not take what it is sent.
    fn backpressure(&self) -> Backpressure;

    /// Put the messages `item` is for this reader in `out` (zero or
    /// more, in order); [`Flow::Stop`] when nothing follows them. `out`
    /// is empty and its room is reused from item to item, so converting
    /// costs no allocation of [`drive`]'s own.
    fn convert(
        &mut self,
        item: Item,
        out: &mut Vec<Self::Msg>,
    ) -> impl Future<Output = Flow> + Send;

    /// Send one message. [`drive`] applies the rule to this future: a
    /// future that is not ready at once is waited for, timed or taken
    /// as a full queue; it must be cancel-safe (dropped when the stop
    /// token is cancelled, or the limit passes).
    fn send(&mut self, msg: Self::Msg) -> impl Future<Output = Sent> + Send;

    /// Resolves when the reader went away while nothing was being sent
    /// (a dashboard page that closed); never, by default.
    fn gone(&self) -> impl Future<Output = ()> + Send {
        std::future::pending()
    }

    /// Whether the reader is gone, asked after each item's messages (an
    /// MCP peer whose transport closed).
    fn closed(&self) -> bool {
        false
    }
}

/// Deliver what `feed` yields to `sink` until the feed is over, the sink
/// stops or is gone, the rule ends it, or `stop` is cancelled (while
/// waiting for an item or for a send). Runs in the task of the reader's
/// publisher, which belongs to the shutdown tree; the feed itself ends
/// when the core stops ([`Item::Ended`]).
pub(crate) async fn drive<F: Feed, S: Sink>(
    feed: &mut F,
    sink: &mut S,
    stop: &CancellationToken,
) -> Ended {
    let rule = sink.backpressure();
    let mut out: Vec<S::Msg> = Vec::new();
    loop {
        let item = tokio::select! {
            biased;
            _ = stop.cancelled() => return Ended::Stopped,
            _ = sink.gone() => return Ended::Gone,
            item = feed.next() => item,
        };
        let Some(item) = item else {
            return Ended::Over;
        };
        out.clear();
        let flow = sink.convert(item, &mut out).await;
        for msg in out.drain(..) {
            match send(sink, msg, rule, stop).await {
                Ok(Sent::Delivered) => {}
                Ok(Sent::Dropped) => break,
                Ok(Sent::Gone) => return Ended::Gone,
                Err(ended) => return ended,
            }
        }
        if flow == Flow::Stop {
            return Ended::Over;
        }
        if sink.closed() {
            return Ended::Gone;
        }
    }
}

/// Send `msg` under `rule`: first one look (ready at once is sent, under
/// every rule), then the rule decides what a send that is not ready
/// becomes.
async fn send<S: Sink>(
    sink: &mut S,
    msg: S::Msg,
    rule: Backpressure,
    stop: &CancellationToken,
) -> Result<Sent, Ended> {
    // Unconstrained: the look must see only whether the reader takes the
    // message, never the runtime's budget for this task running out (a
    // queue with room would look full to `CutOff`).
    let mut sending = pin!(tokio::task::unconstrained(sink.send(msg)));
    let first = std::future::poll_fn(|cx| Poll::Ready(sending.as_mut().poll(cx))).await;
    if let Poll::Ready(sent) = first {
        return Ok(sent);
    }
    match rule {
        Backpressure::CutOff => Err(Ended::CutOff),
        Backpressure::Wait => tokio::select! {
            biased;
            _ = stop.cancelled() => Err(Ended::Stopped),
            sent = &mut sending => Ok(sent),
        },
        Backpressure::DisconnectAfter(limit) => tokio::select! {
            biased;
            _ = stop.cancelled() => Err(Ended::Stopped),
            sent = tokio::time::timeout(limit, &mut sending) => sent.map_err(|_| Ended::Stalled),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Category;
    use tokio::sync::mpsc;

    /// A feed of the items a test sends.
    struct FakeFeed(mpsc::UnboundedReceiver<Item>);

    impl Feed for FakeFeed {
        fn next(&mut self) -> impl Future<Output = Option<Item>> + Send {
            self.0.recv()
        }
    }

    /// What the fake reader got, as text.
    type Got = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

    /// A reader behind a queue of `room` messages that nobody reads:
    /// a send waits while it is full. Each item is one message, its
    /// `Debug` form; `Revoked` and `Ended` stop.
    struct FakeSink {
        rule: Backpressure,
        tx: mpsc::Sender<String>,
        converted: Got,
    }

    impl Sink for FakeSink {
        type Msg = String;

        fn backpressure(&self) -> Backpressure {
            self.rule
        }

        async fn convert(&mut self, item: Item, out: &mut Vec<String>) -> Flow {
            let text = match &item {
                Item::Lagged { missed } => format!("lagged {missed}"),
                Item::Revoked { category } => format!("revoked {category}"),
                other => format!("{other:?}"),
            };
            self.converted.lock().expect("lock").push(text.clone());
            out.push(text);
            if item.is_last() { Flow::Stop } else { Flow::Go }
        }

        async fn send(&mut self, msg: String) -> Sent {
            match self.tx.send(msg).await {
                Ok(()) => Sent::Delivered,
                Err(_) => Sent::Gone,
            }
        }
    }

    struct Fixture {
        feed: mpsc::UnboundedSender<Item>,
        reader: mpsc::Receiver<String>,
        converted: Got,
        stop: CancellationToken,
        task: tokio::task::JoinHandle<Ended>,
    }

    fn start(rule: Backpressure, room: usize) -> Fixture {
        let (feed_tx, feed_rx) = mpsc::unbounded_channel();
        let (tx, reader) = mpsc::channel(room);
        let converted = Got::default();
        let stop = CancellationToken::new();
        let mut sink = FakeSink {
            rule,
            tx,
            converted: converted.clone(),
        };
        let task = {
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut feed = FakeFeed(feed_rx);
                drive(&mut feed, &mut sink, &stop).await
            })
        };
        Fixture {
            feed: feed_tx,
            reader,
            converted,
            stop,
            task,
        }
    }

    fn lagged(missed: u64) -> Item {
        Item::Lagged { missed }
    }

    /// Everything the reader got so far.
    fn drain(reader: &mut mpsc::Receiver<String>) -> Vec<String> {
        let mut got = Vec::new();
        while let Ok(m) = reader.try_recv() {
            got.push(m);
        }
        got
    }

    /// Let every task run until it waits.
    async fn settle() {
        for _ in 0..8 {
            tokio::task::yield_now().await;
        }
    }

    /// `Wait`: a reader that stops reading is waited for, however long
    /// (an hour of paused time), and gets what it was sent once it reads
    /// again; nothing is lost or cut.
    #[tokio::test(start_paused = true)]
    async fn wait_waits_for_a_reader_that_stopped_reading() {
        let mut f = start(Backpressure::Wait, 1);
        f.feed.send(lagged(1)).expect("feed");
        f.feed.send(lagged(2)).expect("feed");
        settle().await;
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(!f.task.is_finished(), "a waiting drive is not ended");
        assert_eq!(drain(&mut f.reader), ["lagged 1"]);
        settle().await;
        assert_eq!(drain(&mut f.reader), ["lagged 2"]);
        f.feed
            .send(Item::Revoked {
                category: Category::Windows,
            })
            .expect("feed");
        assert_eq!(f.reader.recv().await.as_deref(), Some("revoked windows"));
        assert_eq!(f.task.await.expect("join"), Ended::Over);
    }

    /// `DisconnectAfter`: a reader whose queue stays full for the limit is
    /// disconnected, and what came after is never sent to it; before the
    /// limit it is still waited for.
    #[tokio::test(start_paused = true)]
    async fn disconnect_after_ends_a_stalled_reader_and_tells_it_nothing_more() {
        let limit = Duration::from_secs(5);
        let mut f = start(Backpressure::DisconnectAfter(limit), 1);
        f.feed.send(lagged(1)).expect("feed");
        f.feed.send(lagged(2)).expect("feed");
        f.feed.send(lagged(3)).expect("feed");
        settle().await;
        tokio::time::sleep(limit - Duration::from_millis(10)).await;
        assert!(!f.task.is_finished(), "not before the limit");
        tokio::time::sleep(Duration::from_millis(20)).await;
        let ended = tokio::time::timeout(Duration::from_secs(1), &mut f.task)
            .await
            .expect("ended after the limit")
            .expect("join");
        assert_eq!(ended, Ended::Stalled);
        assert_eq!(drain(&mut f.reader), ["lagged 1"], "nothing more after");
        assert_eq!(
            *f.converted.lock().expect("lock"),
            ["lagged 1", "lagged 2"],
            "the third item was never taken"
        );
    }

    /// `CutOff`: the first send the reader's queue cannot take at once
    /// ends it: no wait at all, not even a paused-clock tick.
    #[tokio::test(start_paused = true)]
    async fn cut_off_ends_on_the_first_full_send() {
        let mut f = start(Backpressure::CutOff, 2);
        for n in 1..=4 {
            f.feed.send(lagged(n)).expect("feed");
        }
        let before = tokio::time::Instant::now();
        let ended = f.task.await.expect("join");
        assert_eq!(ended, Ended::CutOff);
        assert_eq!(before, tokio::time::Instant::now(), "no time passed");
        assert_eq!(drain(&mut f.reader), ["lagged 1", "lagged 2"]);
        assert_eq!(f.converted.lock().expect("lock").len(), 3);
    }

    /// `CutOff` does not cut a reader that keeps up.
    #[tokio::test(start_paused = true)]
    async fn cut_off_keeps_a_reader_that_reads() {
        let mut f = start(Backpressure::CutOff, 1);
        for n in 1..=50 {
            f.feed.send(lagged(n)).expect("feed");
            assert_eq!(f.reader.recv().await, Some(format!("lagged {n}")));
        }
        f.stop.cancel();
        assert_eq!(f.task.await.expect("join"), Ended::Stopped);
    }

    /// The stop token ends every rule: while waiting for an item, and
    /// while waiting for a reader that does not read.
    #[tokio::test(start_paused = true)]
    async fn stop_ends_all_three() {
        let rules = [
            Backpressure::Wait,
            Backpressure::DisconnectAfter(Duration::from_secs(3600)),
            Backpressure::CutOff,
        ];
        for rule in rules {
            // Idle: waiting for the next item.
            let f = start(rule, 1);
            settle().await;
            f.stop.cancel();
            assert_eq!(f.task.await.expect("join"), Ended::Stopped, "{rule:?}");
        }
        for rule in &rules[..2] {
            // Blocked on a full queue.
            let f = start(*rule, 1);
            f.feed.send(lagged(1)).expect("feed");
            f.feed.send(lagged(2)).expect("feed");
            settle().await;
            assert!(!f.task.is_finished());
            f.stop.cancel();
            assert_eq!(f.task.await.expect("join"), Ended::Stopped, "{rule:?}");
        }
    }

    /// `Lagged` and `Revoked` reach the sink in the order the feed gave
    /// them, and nothing after the last item is taken.
    #[tokio::test(start_paused = true)]
    async fn lagged_and_revoked_reach_the_sink_in_order() {
        let mut f = start(Backpressure::Wait, 16);
        f.feed.send(lagged(7)).expect("feed");
        f.feed.send(Item::GateChanged).expect("feed");
        f.feed.send(lagged(1)).expect("feed");
        f.feed
            .send(Item::Revoked {
                category: Category::Windows,
            })
            .expect("feed");
        f.feed.send(lagged(9)).expect("feed");
        assert_eq!(f.task.await.expect("join"), Ended::Over);
        let want = ["lagged 7", "GateChanged", "lagged 1", "revoked windows"];
        assert_eq!(drain(&mut f.reader), want);
        assert_eq!(*f.converted.lock().expect("lock"), want);
    }

    /// A reader that went away ends the drive: its queue closed while a
    /// send waited, or the feed ended.
    #[tokio::test(start_paused = true)]
    async fn a_reader_gone_or_a_feed_over_ends_it() {
        let f = start(Backpressure::Wait, 1);
        f.feed.send(lagged(1)).expect("feed");
        f.feed.send(lagged(2)).expect("feed");
        settle().await;
        drop(f.reader);
        assert_eq!(f.task.await.expect("join"), Ended::Gone);

        let f = start(Backpressure::Wait, 1);
        drop(f.feed);
        assert_eq!(f.task.await.expect("join"), Ended::Over);
    }
}
