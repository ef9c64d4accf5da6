"""Resources end to end: a vocabulary lookup table, a queue fed by a producer thread, and
resource variables trained with Adam (docs/resources.md).

A producer thread turns sentences into token ids through a ``HashTableV2`` (unknown
words map to 0) and enqueues (ids, label) pairs into a bounded ``FIFOQueueV2``; the
training loop dequeues batches of 16 (``QueueDequeueManyV2`` waits, holding no thread,
until the producer has enqueued them) and fits a bag-of-embeddings classifier whose
weights are ``ok.ResourceVariable``s, with ``ok.nn.Adam``.  When the producer is done it
closes the queue and the loop ends on the ``OutOfRangeError`` of the next dequeue.

    .venv/bin/python examples/input_pipeline.py [--backend opencl] [--epochs 6]
"""

from __future__ import annotations

import argparse
import threading

import numpy as np

import opkernel as ok

POSITIVE = ["good", "great", "fine", "happy", "nice", "love"]
NEGATIVE = ["bad", "awful", "poor", "sad", "ugly", "hate"]
FILLER = ["the", "a", "film", "day", "was", "is", "very", "so", "it", "food"]
LENGTH, BATCH, DIM = 6, 16, 8


def sentences(n: int, seed: int) -> list[tuple[list[str], float]]:
    """Sentences of filler words with one or two sentiment words, and their label."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        label = float(rng.integers(2))
        words = list(rng.choice(FILLER, LENGTH))
        mood = POSITIVE if label else NEGATIVE
        for k in rng.choice(LENGTH, int(rng.integers(1, 3)), replace=False):
            words[k] = str(rng.choice(mood))
        if rng.random() < 0.1:
            words[0] = "unseen"  # a word the vocabulary lacks
        out.append((words, label))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default=None, help="backend to run on (default: the best installed)")
    parser.add_argument("--epochs", type=int, default=6)
    args = parser.parse_args()
    if args.backend:
        ok.set_backend(args.backend)
    o = ok.ops
    vocab = FILLER + POSITIVE + NEGATIVE
    table = o.hash_table_v2(key_dtype="string", value_dtype="int64")
    o.initialize_table_v2(table, vocab, np.arange(1, len(vocab) + 1, dtype=np.int64))  # 0: unknown
    queue = o.fifo_queue_v2(component_types=[ok.int64, ok.float32], shapes=[[LENGTH], []], capacity=64)
    train, test = sentences(512, seed=1), sentences(128, seed=2)

    def produce() -> None:
        try:
            for _ in range(args.epochs):
                for words, label in train:
                    ids = o.lookup_table_find_v2(table, words, np.int64(0))
                    o.queue_enqueue_v2(queue, [ids, np.float32(label)])
        except ok.errors.CancelledError:  # the training loop closed the queue
            pass
        finally:  # done, or failed: either way the training loop must not wait for more
            o.queue_close_v2(queue)

    rng = np.random.default_rng(0)
    embedding = ok.ResourceVariable(rng.normal(0, 0.1, (len(vocab) + 1, DIM)).astype(np.float32), name="embedding")
    weights = ok.ResourceVariable(np.zeros((DIM, 1), np.float32), name="weights")
    bias = ok.ResourceVariable(np.zeros(1, np.float32), name="bias")
    opt = ok.nn.Adam(0.05)

    def logits(ids: ok.Tensor) -> ok.Tensor:
        pooled = o.mean(o.gather_v2(embedding.read_value(), ids, 0), [1])  # [batch, DIM]
        return o.reshape(o.mat_mul(pooled, weights.read_value()) + bias.read_value(), [-1])

    losses: list[float] = []

    def step(ids: ok.Tensor, labels: ok.Tensor) -> int:
        with ok.GradientTape() as tape:
            z = logits(ids)
            loss = o.mean(o.softplus(z) - labels * z, [0])  # sigmoid cross-entropy
        variables = [embedding, weights, bias]
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        losses.append(float(loss.numpy()))
        return 1

    producer = threading.Thread(target=produce)
    producer.start()
    steps = 0
    try:
        while True:  # until the queue says it is done
            try:
                ids, labels = o.queue_dequeue_many_v2(queue, BATCH, component_types=[ok.int64, ok.float32])
            except ok.errors.OutOfRangeError:  # closed, and fewer than a batch left
                break
            steps += step(ids, labels)
    finally:  # a failing loop must not leave the producer waiting for room forever
        o.queue_close_v2(queue, cancel_pending_enqueues=True)
        producer.join()
    ids = np.stack([o.lookup_table_find_v2(table, words, np.int64(0)).numpy() for words, _ in test])
    predicted = logits(ok.tensor(ids)).numpy() > 0
    accuracy = float(np.mean(predicted == np.array([label for _, label in test], bool)))
    print(f"backend {ok.get_backend()}: {steps} steps of {BATCH} from the queue, final loss {losses[-1]:.4f}, "
          f"test accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
