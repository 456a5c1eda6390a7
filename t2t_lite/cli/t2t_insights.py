"""t2t-insights: translate typed sentences in a browser and see their beams and attention.

    t2t-insights --problem=translate_ende --data_dir=D --output_dir=TRAIN_DIR/avg --port=8010
    # then open http://127.0.0.1:8010/

It listens on 127.0.0.1 (this machine only) unless --host says otherwise; --port=0 takes a
free port and prints it.
"""

from absl import flags

from t2t_lite.cli import flags as t2t_flags
from t2t_lite.decode import input_notes
from t2t_lite.insights import server

FLAGS = flags.FLAGS
flags.DEFINE_integer("port", 8010, "Port of the page; 0 takes a free one.", lower_bound=0, upper_bound=65535)
flags.DEFINE_string(
    "host",
    "127.0.0.1",
    "Address to listen on; 127.0.0.1 keeps the page to this machine, "
    "0.0.0.0 opens it to the network (anyone who reaches the port can decode).",
)


def main(argv):
    del argv
    t2t_flags.prepare()
    if not FLAGS.host.strip():  # "" would listen on every address of the machine, not on none
        raise t2t_flags.UsageError(
            "--host is empty, which listens on every network address of this machine; give 127.0.0.1 "
            "(this machine only) or 0.0.0.0 (the network) explicitly."
        )
    t2t_flags.require("problem", "data_dir")
    model_dir = t2t_flags.trained_model_dir()
    t2t_flags.existing_dir("data_dir")
    if FLAGS.output_dir:
        t2t_flags.existing_dir("output_dir")
    problem = t2t_flags.problem_from_flags()
    t2t_flags.check_model_flag()
    hparams = t2t_flags.trained_hparams(model_dir)
    settings = t2t_flags.decode_settings(hparams, problem)
    checkpoint = FLAGS.checkpoint_path or FLAGS.output_dir
    vocabulary, model = t2t_flags.trained_model(problem, hparams, settings.quantize)
    limit, reason = input_notes.max_input_ids(model, hparams, settings)
    page = server.Insights(
        model,
        vocabulary,
        settings,
        max_input_ids=limit,
        limit_reason=reason,
        title=f"t2t-insights: {problem.name}",
        details=f"{checkpoint}: beam_size={settings.search.beam_size}, alpha={settings.search.alpha}, "
        f"extra_length={settings.search.extra_length}.",
    )
    try:
        http_server = server.make_server(page, FLAGS.host, FLAGS.port)
    except OSError as error:  # port taken, address not of this machine
        raise t2t_flags.UsageError(
            f"--host={FLAGS.host} --port={FLAGS.port}: cannot listen there "
            f"({error.strerror or error}); choose another port, or --port=0 for a free one."
        ) from None
    host, port = http_server.server_address[:2]
    print(f"t2t-insights: serving {problem.name} from {checkpoint} on http://{host}:{port}/ (Ctrl-C stops)", flush=True)
    try:
        http_server.serve_forever()
    except KeyboardInterrupt:
        print("t2t-insights: stopped.")
    finally:
        http_server.server_close()
