// Streams a story from the model built into llmrt. Ctrl-C cancels.
using System;
using System.Threading;
using Llmrt;

static class Program
{
    static int Main(string[] args)
    {
        string prompt = args.Length > 0 ? args[0] : "Once upon a time";
        using (var llm = new LlmContext())
        using (var cts = new CancellationTokenSource())
        {
            Console.CancelKeyPress += (s, e) => { e.Cancel = true; cts.Cancel(); };
            var request = new GenerateRequest(prompt)
            {
                MaxTokens = 200,
                Sampling = new SamplingOptions { Temperature = 0.8f, Seed = 42 },
            };
            Console.Write(prompt);
            try
            {
                var done = llm.Generate(request, e => Console.Write(e.Text), cts.Token);
                Console.WriteLine();
                Console.Error.WriteLine("[{0}: {1} tokens, {2:F2} ms/token]", done.Finish, done.Metrics.GeneratedTokens, done.Metrics.TpotMs);
            }
            catch (OperationCanceledException) { Console.WriteLine(" [cancelled]"); }
            catch (LlmException e) { Console.Error.WriteLine(e.Message); return 1; }
        }
        return 0;
    }
}
