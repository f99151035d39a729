"""ClientApp of the toy app: numpy only, so a deployment-engine ClientApp process starts fast."""

from __future__ import annotations

from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from hf_ext.core.federated import guarded_reply
from hfext_fedtest.task import FedTestConfig, num_examples

app = ClientApp()


@app.train()
def train(msg: Message, context: Context) -> Message:
    config = FedTestConfig.from_run_config(context.run_config)
    partition_id = int(context.node_config["partition-id"])
    if config.reply_mode == "raise":
        raise RuntimeError(f"partition {partition_id} was told to fail")
    received = msg.content["arrays"]
    arrays = ArrayRecord(
        {
            "w": Array(received["w"].numpy() + config.client_step * (partition_id + 1)),
            "steps": Array(received["steps"].numpy() + 1),
        }
    )
    metrics = {"num-examples": num_examples(partition_id), "partition-id": partition_id}
    content = {"arrays": arrays, "metrics": MetricRecord(metrics)}
    if config.reply_mode == "no-arrays":
        del content["arrays"]
    elif config.reply_mode == "no-num-examples":
        del metrics["num-examples"]
        content["metrics"] = MetricRecord(metrics)
    if config.reply_mode == "no-nonce":  # a client that does not echo the round nonce (or an old one)
        return Message(content=RecordDict(content), reply_to=msg)
    return guarded_reply(msg, content)
