"""Prompt bank: thousands of diverse, reproducible training prompts for self-distillation.

Why this exists: the Medusa heads and the small draft model are trained on the target model's own answers
(self-distillation). With only the 300 hand-written prompts of ``data/train_prompts.jsonl`` that is about 27k
tokens of text, and both the heads and the draft overfit it: they memorize those answers instead of learning how
the target model writes in general. More self-distilled text from the same kinds of requests is the fix, and the
cheapest way to get it is many more diverse prompts for the target model to answer.

The prompts are built deterministically from templates x slot lists (topics, programming tasks, languages,
numbers, passages, ...) with a seeded RNG, so the set is identical on any machine and nothing is downloaded. All
passages, companies and people below are written for this project (the fictional ones are invented). Categories
match ``data/prompts.jsonl`` (Spec-Bench format): coding, math, summarization, translation, qa, rag, writing, chat.
Benchmark prompts must never be training data: the CLI excludes every text of ``data/prompts.jsonl`` (and of
``data/train_prompts.jsonl``, which are already used), and the bank's topics and passages steer clear of the
benchmark's. With seed 0 the bank makes 4478 unique prompts (4470 once those two files are excluded); asking
`build_prompts` for more raises ValueError.

Usage::

    python data/prompt_bank.py --n 1600 --seed 0 --start-id 1001 --out data/train_prompts_extra.jsonl

Building the bank needs only the standard library; the CLI writes the file with `specdec_lab.io.write_jsonl`
(atomic), so running it imports the package.
"""

from __future__ import annotations

import argparse
import json
import os
import random
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

CATEGORIES = ("coding", "math", "summarization", "translation", "qa", "rag", "writing", "chat")
DATA_DIR = Path(__file__).resolve().parent
DEFAULT_EXCLUDE_FILES = (DATA_DIR / "prompts.jsonl", DATA_DIR / "train_prompts.jsonl")


def _clean(text: str) -> str:
    """Collapse the line breaks and indentation of a triple-quoted paragraph into single spaces."""
    return " ".join(text.split())


# Data below is laid out by hand (compact rows); the formatter would put every item on its own line.
# fmt: off
# ====================================================================== passages (summarization and rag)
# (title, paragraph, three questions answerable from the paragraph)
_PASSAGES_RAW: list[tuple[str, str, tuple[str, str, str]]] = [
    ("Honeybees", """Honeybees live in colonies of up to 60,000 insects led by a single queen. Worker bees are all
     female and change jobs as they age, starting as cleaners and nurses and later becoming foragers. A forager
     that finds a good patch of flowers returns to the hive and performs a "waggle dance" that tells other bees
     the direction and distance of the food. Honey is made from nectar that the bees dry by fanning their wings.""",
     ("How many bees can live in one colony?", "What is the purpose of the waggle dance?",
      "How do bees turn nectar into honey?")),
    ("Great Wall", """The Great Wall of China is not a single wall but a series of fortifications built over about
     two thousand years. The best-known sections near Beijing were built during the Ming dynasty, between the 14th
     and 17th centuries, mostly from brick and stone. Earlier walls were often made of rammed earth. Contrary to a
     popular myth, the wall is very hard to see from space with the naked eye.""",
     ("Which dynasty built the best-known sections near Beijing?", "What were earlier walls often made of?",
      "Can the wall easily be seen from space?")),
    ("Nile", """The Nile flows north through eleven countries before reaching the Mediterranean Sea in Egypt. It has
     two main branches: the White Nile, which starts in the Great Lakes region, and the Blue Nile, which starts at
     Lake Tana in Ethiopia. The Blue Nile carries most of the water and fertile silt during the summer rains. For
     thousands of years, the yearly flood made farming possible along the river's banks in the desert.""",
     ("Where does the Blue Nile start?", "Into which sea does the Nile flow?",
      "Why was the yearly flood important for farmers?")),
    ("Printing press", """Around 1440, Johannes Gutenberg developed a printing press that used movable metal type.
     Each letter was cast separately, so pages could be set quickly and the type reused. His most famous work, a
     Latin Bible, was printed around 1455. Within fifty years, printing shops had spread to more than two hundred
     European cities, and books became much cheaper.""",
     ("When did Gutenberg develop his press?", "What was his most famous printed work?",
      "How quickly did printing spread across Europe?")),
    ("Lithium batteries", """Lithium-ion batteries power most phones, laptops and electric cars. When the battery
     charges, lithium ions move from the positive electrode to the negative one, and they flow back when it
     discharges. The batteries are light and store a lot of energy, but they wear out slowly with each charge
     cycle. Keeping them very hot or always at 100 percent charge makes them age faster.""",
     ("Which way do lithium ions move while the battery charges?", "What makes these batteries age faster?",
      "Name two advantages of lithium-ion batteries.")),
    ("Sourdough", """Sourdough bread rises without packaged yeast. Instead, bakers use a starter: a mix of flour and
     water in which wild yeast and lactic acid bacteria grow. The bacteria produce acids that give the bread its
     tangy taste, while the yeast produces the gas that makes the dough rise. A starter must be fed fresh flour
     and water regularly, and some bakers keep the same starter alive for decades.""",
     ("What makes sourdough rise?", "What gives sourdough its tangy taste?",
      "How do bakers keep a starter alive?")),
    ("Plate tectonics", """The Earth's outer shell is broken into large plates that move a few centimeters each year,
     about as fast as fingernails grow. Where plates pull apart, new crust forms, as along the Mid-Atlantic Ridge.
     Where they collide, one plate may sink beneath the other, creating deep trenches and volcanoes. Most
     earthquakes happen near the edges of the plates.""",
     ("How fast do tectonic plates move?", "What happens where plates pull apart?",
      "Where do most earthquakes happen?")),
    ("Iceland", """Iceland is a volcanic island in the North Atlantic with about 380,000 inhabitants, most of whom
     live in and around the capital, Reykjavik. Thanks to its volcanic activity, the country gets nearly all of
     its electricity from hydropower and geothermal energy. Hot water from underground heats most homes. Glaciers
     cover about a tenth of the land.""",
     ("What is the capital of Iceland?", "Where does Iceland get its electricity?",
      "How much of the land is covered by glaciers?")),
    ("Coral reefs", """Coral reefs cover less than one percent of the ocean floor but are home to about a quarter of
     all marine species. Corals are tiny animals that live together with algae; the algae make food from
     sunlight and give the corals their color. When the water gets too warm, corals expel the algae and turn
     white, a process called bleaching. If the heat lasts too long, the corals die.""",
     ("What share of marine species live on coral reefs?", "What is coral bleaching?",
      "What do the algae give the corals?")),
    ("Marathon", """The marathon is a running race of 42.195 kilometers. It is named after a Greek legend in which a
     messenger ran from the battlefield of Marathon to Athens to announce a victory. The race was part of the
     first modern Olympic Games in 1896. The odd distance was fixed in 1921 and comes from the 1908 London
     Olympics, where the course was set to finish in front of the royal box.""",
     ("How long is a marathon?", "Where does the name come from?",
      "Which Olympic Games set the odd distance?")),
    ("Memo: office move", """To all staff at Brightline Design: our office will move from the fourth floor to the
     new space on the second floor over the weekend of March 14. Please pack your desk into the labeled boxes by
     Thursday at 5 p.m. IT will disconnect computers on Friday morning, so plan to work from home that day. The new
     kitchen will open on Monday, and the old parking passes will still work.""",
     ("By when must staff pack their desks?", "Where should staff work on Friday?",
      "Will the old parking passes still work?")),
    ("Product: Kettle", """The AquaBoil Mini is a compact electric kettle that holds 0.8 liters, enough for four
     cups of tea. It boils water in about two minutes and switches off automatically when the water boils or if
     the kettle is empty. The body is made of brushed steel with a cool-touch handle. It comes in three colors and
     has a two-year warranty.""",
     ("How much water does the kettle hold?", "When does the kettle switch off?",
      "How long is the warranty?")),
    ("Email: order delay", """Hi Priya, thanks for your order of twelve ceramic mugs from Clayworks Studio.
     Unfortunately, our kiln broke last week, and the blue glaze mugs will be about ten days late. We can either
     ship the six white mugs now and the rest later at no extra cost, or send everything together on the 22nd.
     Please reply to tell us which you prefer. Sorry for the wait! Best, Tom""",
     ("Why is the order delayed?", "What two options does Tom offer?",
      "How many mugs did Priya order?")),
    ("Volcanoes", """A volcano forms where molten rock, called magma, rises to the surface. Once it erupts, the
     molten rock is called lava. Some volcanoes, like those in Hawaii, have runny lava that flows gently and
     builds wide, gentle slopes. Others have thick, sticky magma that traps gas and can explode violently, as Mount
     St. Helens did in 1980.""",
     ("What is magma called after it erupts?", "Why do some volcanoes explode violently?",
      "What kind of slopes do Hawaiian volcanoes build?")),
    ("Tea", """Tea is the most widely drunk beverage in the world after water. Green, black and oolong teas all come
     from the same plant, Camellia sinensis; the difference lies in how the leaves are processed. Black tea leaves
     are fully oxidized, green tea leaves are heated early to stop oxidation, and oolong is in between. Herbal
     "teas" such as chamomile come from other plants.""",
     ("Which plant do green and black tea come from?", "What makes black tea different from green tea?",
      "Is chamomile tea made from the tea plant?")),
    ("Internet packets", """When you send a message over the internet, it is broken into small pieces called
     packets. Each packet carries the address of its destination and may travel by a different route. Routers
     pass packets along from network to network, and the receiving computer puts them back in the right order. If
     a packet is lost, it can be sent again.""",
     ("What are packets?", "What do routers do?", "What happens if a packet is lost?")),
    ("Community garden", """The Elm Street Community Garden opened in 2019 on an empty lot owned by the city. It
     has 48 raised beds, which residents rent for $30 a season. Gardeners must water their beds at least twice a
     week and attend two volunteer workdays each year. Extra vegetables are donated to the local food bank every
     Saturday.""",
     ("How much does it cost to rent a bed?", "What must gardeners do each year?",
      "Where do extra vegetables go?")),
    ("Penguins", """Penguins are flightless birds that live almost entirely in the Southern Hemisphere. Their wings
     have evolved into stiff flippers, making them fast, agile swimmers. Emperor penguins, the largest species,
     breed during the Antarctic winter; the males keep the eggs warm on their feet for about two months without
     eating. The smallest species, the little penguin, is about 30 centimeters tall.""",
     ("Where do most penguins live?", "How do male emperor penguins care for the eggs?",
      "How tall is the little penguin?")),
    ("Silk Road", """The Silk Road was a network of trade routes linking China with Central Asia, the Middle East and
     Europe. It flourished from about the 2nd century BC to the 15th century. Besides silk, merchants carried
     spices, paper, glass and horses. Ideas traveled too: religions, inventions and stories spread along the same
     paths as the goods.""",
     ("Which regions did the Silk Road connect?", "Name three goods traded besides silk.",
      "What else spread along the routes besides goods?")),
    ("Policy: remote work", """Under the new remote work policy at Fernway Insurance, employees may work from home
     up to three days per week after finishing their first six months. Team leads must approve the schedule in
     advance. Everyone is expected in the office on Tuesdays for team meetings. The company provides a one-time
     $300 allowance for home office equipment.""",
     ("How many days per week can employees work from home?", "Which day must everyone be in the office?",
      "How large is the home office allowance?")),
    ("Moon", """The Moon is about a quarter of the Earth's width and orbits it roughly once every 27 days. It has no
     light of its own; it shines by reflecting sunlight. The Moon's gravity causes most of the tides in the oceans.
     Because the Moon spins exactly once per orbit, the same side always faces the Earth.""",
     ("How often does the Moon orbit the Earth?", "Why does the Moon shine?",
      "Why do we always see the same side of the Moon?")),
    ("Recycling aluminum", """Aluminum cans can be recycled again and again without losing quality. Making a can
     from recycled aluminum uses about 95 percent less energy than making one from raw ore. In many countries a
     used can is melted down and back on a store shelf within about two months. Because of this, aluminum is one
     of the most valuable items in a recycling bin.""",
     ("How much energy does recycling aluminum save?", "How fast can a recycled can return to the shelf?",
      "Does aluminum lose quality when recycled?")),
    ("Product: Backpack", """The TrailLite 28 is a 28-liter hiking backpack that weighs just 900 grams. It has a
     padded laptop sleeve, two side pockets for water bottles and a rain cover hidden in the bottom pocket. The
     back panel is made of breathable mesh to keep you cool on long climbs. It is sold in green, gray and orange
     for $89.""",
     ("How much does the backpack weigh?", "Where is the rain cover stored?", "What does the backpack cost?")),
    ("Ancient Rome roads", """The Romans built more than 80,000 kilometers of paved roads across their empire. The
     roads were made in layers, with large stones at the bottom and fitted paving stones on top, and they were
     slightly curved so that rain ran off to the sides. Milestones along the way told travelers the distance to
     the next town. Some Roman roads are still used today.""",
     ("How many kilometers of roads did the Romans build?", "Why were the roads slightly curved?",
      "What did milestones tell travelers?")),
    ("Deserts", """A desert is defined by how little rain it gets, not by how hot it is: usually less than 250
     millimeters per year. Antarctica is in fact the largest desert on Earth. Hot deserts such as the Sahara can
     be very cold at night because dry air and clear skies let heat escape quickly. Many desert plants store water
     in thick stems or leaves.""",
     ("How is a desert defined?", "What is the largest desert on Earth?",
      "Why can hot deserts be cold at night?")),
    ("Notice: pool closure", """Notice to members of the Riverside Sports Club: the indoor pool will be closed from
     June 3 to June 17 for retiling and filter repairs. During this time, members can use the outdoor pool, which
     opens an hour earlier than usual, at 6 a.m. Swimming lessons will be moved to the outdoor pool. Monthly fees
     will be reduced by 10 percent for June.""",
     ("When is the indoor pool closed?", "When does the outdoor pool open during the closure?",
      "How will June fees change?")),
    ("Blood", """An adult human has about five liters of blood. Red blood cells carry oxygen from the lungs to the
     rest of the body using a protein called hemoglobin, which also gives blood its red color. White blood cells
     fight infections, and platelets help the blood clot when you are cut. Red blood cells live for about four
     months before the body replaces them.""",
     ("How much blood does an adult have?", "What do platelets do?", "How long do red blood cells live?")),
    ("Amazon rainforest", """The Amazon rainforest covers about 5.5 million square kilometers, mostly in Brazil.
     It holds roughly one in ten known species on Earth. The forest creates much of its own rain: trees release
     water vapor that forms clouds, which then fall as rain further west. Large-scale clearing for farming has
     reduced the forest's area over the past fifty years.""",
     ("In which country is most of the Amazon?", "How does the forest create its own rain?",
      "What has reduced the forest's area?")),
    ("Email: team lunch", """Hi everyone, to celebrate the launch of the new website, we're having a team lunch on
     Thursday at 12:30 at Olive & Thyme, two blocks from the office. The company is paying, so order whatever you
     like. Please tell Marco by Tuesday if you have any dietary needs. If you can't make it, we'll save you a
     dessert. Cheers, Hannah""",
     ("Why is the team having lunch?", "Who should be told about dietary needs?",
      "Where is the lunch?")),
    ("Telescope", """Galileo Galilei did not invent the telescope, but in 1609 he built improved versions and turned
     them to the sky. He saw mountains on the Moon, the phases of Venus, and four moons circling Jupiter. These
     observations supported the idea that the Earth moves around the Sun. He published his findings in a short
     book called The Starry Messenger.""",
     ("Did Galileo invent the telescope?", "What did Galileo see around Jupiter?",
      "What was his book called?")),
    ("Bridges", """Engineers choose a bridge design based on the distance to cross and the ground below. Beam bridges
     are simple and cheap but only work for short spans. Arch bridges push their load outward into the ground at
     each end. Suspension bridges hang the deck from cables strung between tall towers and can cross the longest
     distances, such as wide bays.""",
     ("Which bridge type works only for short spans?", "How does an arch bridge carry its load?",
      "Which type crosses the longest distances?")),
    ("Product: App", """BudgetBee is a free mobile app for tracking everyday spending. Users can photograph
     receipts, and the app sorts each purchase into categories such as groceries, transport and fun. A weekly
     report shows where the money went and warns when a category goes over its limit. A premium version for $3
     per month adds shared budgets for families.""",
     ("How does BudgetBee sort purchases?", "What does the weekly report show?",
      "What does the premium version add?")),
    ("Hurricanes", """Hurricanes form over warm ocean water, usually at least 26 degrees Celsius. Warm, moist air
     rises, cools and forms clouds, releasing heat that powers the storm. The calm center is called the eye, and
     the strongest winds swirl in the eyewall around it. Hurricanes weaken over land because they lose their
     supply of warm, moist air.""",
     ("What water temperature do hurricanes need?", "What is the eye of a hurricane?",
      "Why do hurricanes weaken over land?")),
    ("Chocolate", """Chocolate is made from the seeds of the cacao tree, which grows near the equator. The seeds are
     fermented for several days, dried, roasted and ground into a paste. Dark chocolate contains a high share of
     cacao, while milk chocolate adds milk powder and more sugar. The Aztecs drank cacao as a bitter, spiced drink
     long before it became a sweet treat in Europe.""",
     ("Where does the cacao tree grow?", "What is added to make milk chocolate?",
      "How did the Aztecs consume cacao?")),
    ("Library hours", """The Hillcrest Town Library is open Monday to Friday from 9 a.m. to 8 p.m. and on Saturdays
     from 10 a.m. to 4 p.m.; it is closed on Sundays. Members can borrow up to ten books for three weeks and renew
     them twice online. Late returns cost 20 cents per book per day. Children's story time takes place every
     Wednesday at 4 p.m.""",
     ("Is the library open on Sundays?", "How many times can a loan be renewed?",
      "When is children's story time?")),
    ("Mount Everest", """Mount Everest, on the border between Nepal and China, is the highest mountain above sea
     level at 8,849 meters. It was first climbed in 1953 by Edmund Hillary and Tenzing Norgay. Near the top, the
     air has only about a third of the oxygen available at sea level, so most climbers use bottled oxygen. The
     main climbing season is in May, when the winds are calmer.""",
     ("How tall is Mount Everest?", "Who first climbed it, and when?",
      "Why do most climbers use bottled oxygen?")),
    ("Vitamin D", """The body makes vitamin D when the skin is exposed to sunlight. The vitamin helps the body
     absorb calcium, which keeps bones strong. People who live far from the equator may get too little sunlight in
     winter to make enough. Small amounts are also found in oily fish, egg yolks and fortified milk.""",
     ("How does the body make vitamin D?", "Why is vitamin D important for bones?",
      "Name two foods that contain vitamin D.")),
    ("Memo: IT update", """From the IT team at Kestrel Foods: on Saturday night, all laptops will receive a security
     update that requires a restart. Please save your work and leave your laptop plugged in and switched on before
     you leave on Friday. The update takes about 40 minutes. If your laptop shows an error on Monday morning, call
     the help desk at extension 4410.""",
     ("When will the update happen?", "What should staff do before leaving on Friday?",
      "Whom should staff call if there is an error?")),
    ("Octopus", """Octopuses have eight arms, three hearts and blue blood. Most of their neurons are in their arms,
     which can taste and touch on their own. They can change the color and texture of their skin in a fraction of
     a second to hide from predators. Most species live only one or two years.""",
     ("How many hearts does an octopus have?", "Why do octopuses change color?",
      "How long do most octopuses live?")),
    ("Electric cars", """An electric car uses a battery and an electric motor instead of a gasoline engine. Electric
     motors turn about 85 to 90 percent of their energy into motion, while gasoline engines manage closer to 30
     percent. Many electric cars recover energy when braking, which is called regenerative braking. Charging at
     home overnight is usually the cheapest option, while fast chargers on highways can add hundreds of kilometers
     of range in half an hour.""",
     ("How efficient are electric motors compared with gasoline engines?", "What is regenerative braking?",
      "What is usually the cheapest way to charge?")),
]
PASSAGES: list[tuple[str, str, tuple[str, str, str]]] = [(t, _clean(p), qs) for t, p, qs in _PASSAGES_RAW]

# ====================================================================== translation
SENTENCES = [
    "Where is the nearest train station?", "Could you please speak a little more slowly?",
    "I have been learning to play the guitar for two years.", "The soup is too salty for my taste.",
    "We are going to the beach tomorrow if the weather is nice.", "My phone battery died in the middle of the call.",
    "How much does a ticket to the city center cost?", "She works as a nurse at the children's hospital.",
    "Please close the window; it is getting cold.", "I forgot my umbrella at the office.",
    "The meeting has been moved to Thursday afternoon.", "Our neighbors have a very friendly dog.",
    "Can I pay by card, or only in cash?", "This book is much more interesting than the film.",
    "I usually drink coffee without sugar.", "The children are playing in the garden.",
    "We missed the last bus and had to walk home.", "Is there a pharmacy open on Sundays?",
    "He has lived in this city since he was a child.", "I would like a room with a view of the sea.",
    "The museum is free on the first Sunday of the month.", "Don't forget to water the plants while I'm away.",
    "My sister is two years younger than me.", "The restaurant was full, so we ate at home.",
    "What time does the shop close today?", "I need to buy a present for my mother's birthday.",
    "The train was late because of the snow.", "Could you recommend a good book for a long flight?",
    "We planted tomatoes and basil on the balcony.", "I can't find my keys anywhere.",
    "The concert starts at half past seven.", "He runs five kilometers every morning before work.",
    "This street is very quiet at night.", "I'm sorry, I don't understand the question.",
    "They are building a new bridge across the river.", "Please send me the document by Friday.",
    "The bakery on the corner sells the best bread in town.", "My grandfather tells wonderful stories.",
    "Is this seat free?", "We need more chairs for the guests.",
    "It snowed all night, and the roads are closed.", "I prefer tea in the morning and water in the evening.",
    "The doctor told me to rest for a few days.", "Our flight leaves early tomorrow morning.",
    "The cat is sleeping on the sofa again.", "Could you help me carry these boxes?",
    "I'm learning to cook traditional dishes from my region.", "The library has a large collection of old maps.",
    "We celebrated her birthday with a picnic in the park.", "The price includes breakfast and free parking.",
    "My computer is very slow today.", "Turn left at the second traffic light.",
    "The lake is too cold for swimming in April.", "I have an appointment with the dentist at ten.",
    "He painted the kitchen yellow last weekend.", "Let's meet in front of the cinema.",
    "The market sells fresh fish every Friday.", "I don't eat meat, but I eat fish.",
    "The students are preparing for their final exams.", "Thank you very much for your help yesterday.",
    "We lost the game, but we had a lot of fun.", "The hotel is a ten-minute walk from the station.",
    "My favorite season is autumn because of the colors.", "The printer on the second floor is out of paper.",
    "Please turn off the lights when you leave.", "There is a small bakery next to my apartment.",
    "I would like to open a bank account.", "Our teacher gave us a lot of homework this week.",
    "How long does it take to get to the airport?", "The garden looks beautiful in spring.",
    "She speaks three languages fluently.", "Can you tell me where the toilets are?",
    "I'm looking for a birthday card for a friend.", "The mountains are covered with snow in winter.",
    "We have to leave before it gets dark.", "Everyone was happy with the results of the project.",
    "My brother fixed my bicycle this morning.", "Could we have the bill, please?",
    "The new café serves excellent cakes.", "I will call you as soon as I arrive.",
    "It is important to drink enough water when it's hot.", "The shop will be closed for the holidays.",
]
LANGUAGES = ("French", "Spanish", "German", "Italian", "Portuguese")
TRANSLATE_TEMPLATES = (
    "Translate into {lang}: {text}",
    "How do you say this in {lang}? \"{text}\"",
    "Please translate the following sentence into {lang}.\n\n{text}",
    "Translate this to {lang} and keep the tone natural: {text}",
)
TRANSLATE_PAIR_TEMPLATES = (
    "Translate these two sentences into {lang}:\n\n{text}",
    "Please translate the following short text into {lang}.\n\n{text}",
)
REVERSE = [
    ("French", "Je voudrais réserver une table pour deux personnes ce soir."),
    ("French", "Il fait très beau aujourd'hui, allons nous promener."),
    ("French", "Pouvez-vous m'indiquer le chemin de la gare ?"),
    ("French", "Nous avons visité un petit village près de la mer."),
    ("Spanish", "¿Dónde puedo comprar billetes para el autobús?"),
    ("Spanish", "Mi hermano trabaja en una oficina en el centro."),
    ("Spanish", "Mañana vamos a cenar en casa de mis abuelos."),
    ("Spanish", "Me gusta leer antes de dormir."),
    ("German", "Ich habe heute keine Zeit, aber morgen passt es gut."),
    ("German", "Wie spät ist es, bitte?"),
    ("German", "Der Zug nach München fährt von Gleis drei ab."),
    ("Italian", "Vorrei un caffè e un cornetto, per favore."),
    ("Italian", "La biblioteca è chiusa il lunedì."),
    ("Portuguese", "Onde fica o museu mais próximo?"),
    ("Portuguese", "Eu gosto muito de caminhar na praia."),
]
REVERSE_TEMPLATES = (
    "Translate this {lang} sentence into English: {text}",
    "What does this mean in English? \"{text}\"",
    "Translate from {lang} to English: {text}",
)

# ====================================================================== coding
CODE_TASKS = [
    "counts how many times each character appears in a string", "returns the second largest number in a list",
    "checks whether a list is sorted in ascending order", "converts a binary string such as '1011' to an integer",
    "returns the sum of the digits of an integer", "finds the longest word in a sentence",
    "removes all whitespace from a string", "returns the intersection of two lists without duplicates",
    "generates all prime numbers below n", "converts a string to title case", "reverses a linked list",
    "computes the average of the values in a dictionary", "checks whether a string contains only digits",
    "returns the most common element in a list", "converts kilometers to miles",
    "calculates compound interest given a principal, a yearly rate and a number of years",
    "finds the index of a value in a sorted list using binary search", "sorts a list of words by their length",
    "counts the words in a text", "returns the transpose of a matrix given as a list of lists",
    "checks whether a number is a perfect square", "merges two sorted lists into one sorted list",
    "returns all even numbers from a list", "truncates a string to a given length and adds '...'",
    "converts a list of key-value pairs into a dictionary", "computes the power set of a small list",
    "validates that a password has at least eight characters, one digit and one uppercase letter",
    "finds the missing number in a list containing 1 to n with one number missing",
    "converts a date string 'YYYY-MM-DD' into 'DD/MM/YYYY'", "returns the n largest items of a list",
    "counts the number of uppercase letters in a string", "computes the dot product of two vectors",
    "checks whether a string has balanced parentheses", "implements a simple stack with push and pop",
    "generates a random password of a given length", "returns the difference in days between two dates",
    "groups a list of words by their first letter", "replaces every vowel in a string with '*'",
    "converts a number to its English ordinal form, such as 1st, 2nd and 3rd", "finds duplicates in a list",
    "computes the least common multiple of two numbers", "returns the cumulative product of a list",
    "removes None values from a list", "calculates the area of a triangle from its three sides",
    "checks whether two rectangles overlap", "counts the lines in a string that contain a given word",
    "returns the characters that appear in both of two strings", "shuffles a list without using a library shuffle",
    "converts a hex color like '#FF8800' to an RGB tuple", "returns the first non-repeating character in a string",
    "computes a moving average over a window of k values", "finds all pairs in a list that add up to a target",
    "rounds a price to the nearest 5 cents", "converts snake_case names to camelCase",
    "counts the number of islands of 1s in a grid", "implements a queue using two stacks",
    "checks whether a number is an Armstrong number", "returns the number of days in a given month and year",
    "removes HTML tags from a string", "compresses a string like 'aaabcc' into 'a3b1c2'",
    "finds the longest common prefix of a list of strings", "computes the Levenshtein distance between two words",
    "generates the first n rows of Pascal's triangle", "checks whether a sentence is a pangram",
    "returns the kth smallest number in a list", "converts a temperature table from Fahrenheit to Celsius",
    "counts how many numbers in a list are between two bounds", "splits a full name into first and last name",
    "returns a dictionary with the lengths of each word in a list", "converts minutes into a 'h:mm' string",
    "finds the maximum sum of any contiguous sublist", "checks whether a matrix is symmetric",
    "removes consecutive duplicate characters from a string", "returns a list of the squares of odd numbers",
    "parses a query string like 'a=1&b=2' into a dictionary", "calculates the body mass index from weight and height",
    "validates a simple IPv4 address", "sums all numbers in a nested list",
    "returns the number of vowels and consonants in a word", "formats a number with thousands separators",
]
CODE_LANGS = ("Python", "JavaScript")
CODE_TEMPLATES = (
    "Write a {lang} function that {task}.",
    "Can you show me a {lang} function that {task}?",
    "I need a {lang} function that {task}. Please add a couple of test examples.",
    "Write a {lang} function that {task}, and explain the time complexity.",
    "Implement a {lang} function that {task}. Keep it short and readable.",
    "Write a {lang} function that {task}, with a docstring or comment explaining each step.",
    "How would you write a {lang} function that {task}? Explain your approach first, then give the code.",
)
SQL_TASKS = [
    ("employees(id, name, department, salary)", "the average salary in each department"),
    ("employees(id, name, department, salary)", "the three highest-paid employees"),
    ("employees(id, name, department, salary, manager_id)", "each employee's name together with their manager's name"),
    ("products(id, name, category, price)", "all products that cost more than the average price"),
    ("products(id, name, category, price)", "the number of products in each category, largest first"),
    ("orders(id, customer_id, order_date, total)", "the total revenue for each month of 2022"),
    ("orders(id, customer_id, order_date, total)", "customers who have not ordered anything in the last 90 days"),
    ("students(id, name, class), grades(student_id, subject, score)", "each student's average score"),
    ("students(id, name, class), grades(student_id, subject, score)", "the best student in every subject"),
    ("books(id, title, author, year), loans(book_id, member_id, loan_date)", "books that have never been borrowed"),
    ("books(id, title, author, year), loans(book_id, member_id, loan_date)", "the five most borrowed books"),
    ("flights(id, origin, destination, departure, price)", "the cheapest flight for each destination"),
]
SQL_TEMPLATES = (
    "Write a SQL query that returns {goal}. The table is:\n\n{schema}",
    "Given the tables {schema}, write a SQL query to find {goal}.",
    "I have this schema: {schema}. How do I query {goal}? Please explain the query.",
)
BASH_TASKS = [
    "count the number of .txt files in a folder", "find all files larger than 100 MB in the home directory",
    "rename every .jpeg file in a folder to .jpg", "print the ten most common words in a text file",
    "back up a folder into a dated .tar.gz archive", "delete log files older than 30 days",
    "show which process is using the most memory", "print the lines of a CSV file where the third column is empty",
    "download a list of URLs from a text file one by one", "check whether a website responds and print the status",
    "replace a word in every .md file in a folder", "count the lines of Python code in a project",
]
BASH_TEMPLATES = (
    "Write a bash command or short script to {task}.",
    "How can I {task} from the Linux command line?",
    "Give me a bash one-liner to {task}, and explain each part.",
)
BUGGY = [
    ("count the even numbers in a list", "def count_even(nums):\n    count = 0\n    for n in nums:\n"
     "        if n % 2 == 1:\n            count += 1\n    return count"),
    ("return the last element of a list", "def last(items):\n    return items[len(items)]"),
    ("join words with spaces", "def join_words(words):\n    result = ''\n    for w in words:\n"
     "        result += w\n    return result"),
    ("square every number in a list", "def squares(nums):\n    out = []\n    for n in nums:\n"
     "        out = n * n\n    return out"),
    ("return True if a string starts with a capital letter", "def starts_upper(s):\n    return s[0].islower()"),
    ("compute the product of a list", "def product(nums):\n    total = 0\n    for n in nums:\n"
     "        total *= n\n    return total"),
    ("count down from n to 1", "def countdown(n):\n    while n > 0:\n        print(n)"),
]
BUGGY_TEMPLATES = (
    "This Python function should {goal}, but it has a bug. Find it and fix it.\n\n```python\n{code}\n```",
    "Why doesn't this code {goal} correctly? Explain the problem and give a fixed version.\n\n```python\n{code}\n```",
    "Review this function, which is meant to {goal}. What is wrong with it?\n\n```python\n{code}\n```",
)

# ====================================================================== math
NAMES = [
    "Amira", "Ben", "Carla", "Dev", "Elena", "Felix", "Grace", "Hiro", "Isla", "Jonah", "Keiko", "Leo", "Maya",
    "Nikolai", "Olivia", "Pablo", "Rosa", "Samuel", "Tara", "Victor", "Wen", "Yusuf", "Zoe", "Nadia",
]
ITEMS = [("apples", 0.5), ("muffins", 2.25), ("notebooks", 1.75), ("tickets", 12.0), ("candles", 4.5),
         ("bus passes", 2.5), ("pencils", 0.4), ("plants", 6.0), ("socks", 3.0), ("mangoes", 1.2)]
MATH_SUFFIXES = ("", " Show your work.", " Explain each step.", " Give the answer and a one-line check.")


def _money(x: float) -> str:
    return f"${x:,.2f}"


def _m_shopping(r: random.Random) -> str:
    (a, pa), (b, pb) = r.sample(ITEMS, 2)
    na, nb, name = r.randint(2, 9), r.randint(2, 9), r.choice(NAMES)
    return (f"{name} buys {na} {a} at {_money(pa)} each and {nb} {b} at {_money(pb)} each. "
            f"How much does {name} spend in total, and how much change is left from {_money(50)}?")


def _m_percent(r: random.Random) -> str:
    price, pct = r.randrange(20, 400, 5), r.choice([10, 15, 20, 30, 35, 40, 50])
    return f"A jacket costs {_money(price)} and is discounted by {pct}%. What is the new price?"


def _m_percent_of(r: random.Random) -> str:
    return f"What is {r.choice([5, 12, 15, 25, 40, 75, 120])}% of {r.randrange(40, 2000, 20)}?"


def _m_percent_change(r: random.Random) -> str:
    a = r.randrange(100, 900, 10)
    b = a + r.choice([-1, 1]) * r.randrange(10, a // 2, 10)
    thing = r.choice(["the population of a village", "the number of monthly visitors to a website",
                      "the price of a bike in dollars", "a shop's weekly revenue in dollars"])
    return f"Last year {thing} was {a}; this year it is {b}. What is the percentage change?"


def _m_linear(r: random.Random) -> str:
    a, x, b = r.randint(2, 12), r.randint(-9, 15), r.randint(-20, 30)
    op = "+" if b >= 0 else "-"
    return f"Solve for x: {a}x {op} {abs(b)} = {a * x + b}."


def _m_speed(r: random.Random) -> str:
    v, h = r.randrange(40, 130, 5), r.choice([1.5, 2, 2.5, 3, 4, 0.75])
    return (f"A car travels at {v} km/h for {h} hours. How far does it go? "
            f"How long would the same trip take at {v + 20} km/h?")


def _m_units(r: random.Random) -> str:
    return r.choice([
        f"Convert {r.randint(2, 95)} miles to kilometers (1 mile = 1.609 km).",
        f"How many seconds are there in {r.randint(2, 30)} hours?",
        f"Convert {r.randrange(150, 5000, 50)} grams to kilograms and to pounds (1 kg = 2.2 lb).",
        f"A recipe needs {r.randint(2, 8)} cups of milk. How many milliliters is that if 1 cup = 240 ml?",
        f"Convert {r.randint(-10, 40)} degrees Celsius to Fahrenheit.",
        f"How many square meters is a room that is {r.randint(3, 9)} m by {r.randint(3, 12)} m? "
        f"How many square feet is that (1 m² ≈ 10.76 ft²)?",
    ])


def _m_area(r: random.Random) -> str:
    return r.choice([
        f"A garden is {r.randint(4, 30)} m long and {r.randint(3, 20)} m wide. What are its area and perimeter?",
        f"A triangle has a base of {r.randint(3, 25)} cm and a height of {r.randint(3, 25)} cm. What is its area?",
        f"What is the circumference of a circle with a diameter of {r.randint(2, 40)} cm? Use 3.14 for pi.",
        f"A box is {r.randint(2, 12)} cm by {r.randint(2, 12)} cm by {r.randint(2, 12)} cm. What is its volume?",
        f"A square has an area of {r.randint(3, 20) ** 2} square meters. How long is each side?",
    ])


def _m_work(r: random.Random) -> str:
    a, b = r.sample([2, 3, 4, 5, 6, 8, 10, 12], 2)
    n1, n2 = r.sample(NAMES, 2)
    return (f"{n1} can paint a fence in {a} hours, and {n2} can paint it in {b} hours. "
            f"How long will it take if they work together?")


def _m_ratio(r: random.Random) -> str:
    a, b, k = r.randint(1, 5), r.randint(2, 7), r.randint(3, 12)
    return (f"In a class the ratio of boys to girls is {a}:{b}, and there are {(a + b) * k} students. "
            f"How many girls are there?")


def _m_interest(r: random.Random) -> str:
    p, rate, y = r.randrange(500, 10000, 250), r.choice([2, 3, 4, 5, 6]), r.randint(2, 6)
    kind = r.choice(["simple", "compound (once per year)"])
    return f"If you invest {_money(p)} at {rate}% {kind} interest for {y} years, how much will you have?"


def _m_average(r: random.Random) -> str:
    scores = [r.randint(55, 100) for _ in range(r.randint(3, 5))]
    return (f"A student scored {', '.join(map(str, scores))} on her tests. What score does she need on the next "
            f"test to have an average of {min(sum(scores) // len(scores) + r.randint(1, 5), 99)}?")


def _m_age(r: random.Random) -> str:
    n1, n2 = r.sample(NAMES, 2)
    k, a, y = r.randint(2, 4), r.randint(3, 12), r.randint(2, 10)
    return f"{n1} is {k} times as old as {n2}. In {y} years, {n1} will be {k * a + y}. How old is {n2} now?"


def _m_arith(r: random.Random) -> str:
    a, b, c = r.randint(12, 99), r.randint(3, 19), r.randint(2, 60)
    return r.choice([
        f"Calculate {a} × {b} + {c} without a calculator, and explain how you did it.",
        f"What is {a * b} divided by {b}?",
        f"Simplify the fraction {a * 2}/{b * 2 * 3}.",
        f"What is {a}² − {b}²? Can you use a trick to make it easier?",
        f"Add the fractions 1/{b} and 1/{c}.",
    ])


def _m_system(r: random.Random) -> str:
    x, y = r.randint(-5, 12), r.randint(-5, 12)
    a, b = r.randint(1, 5), r.randint(1, 5)
    return f"Solve the system: {a}x + {b}y = {a * x + b * y} and x - y = {x - y}."


def _m_time(r: random.Random) -> str:
    h, m, d = r.randint(1, 10), r.choice([0, 15, 20, 45]), r.randint(75, 190)
    return (f"A movie starts at {h}:{m:02d} p.m. and lasts {d} minutes. What time does it end? "
            f"Write the answer in both 12-hour and 24-hour format.")


def _m_probability(r: random.Random) -> str:
    red, blue, green = r.randint(1, 9), r.randint(1, 9), r.randint(1, 9)
    return (f"A bag has {red} red, {blue} blue and {green} green marbles. If you pick one at random, what is the "
            f"probability that it is not blue?")


MATH_MAKERS: tuple[Callable[[random.Random], str], ...] = (
    _m_shopping, _m_percent, _m_percent_of, _m_percent_change, _m_linear, _m_speed, _m_units, _m_area, _m_work,
    _m_ratio, _m_interest, _m_average, _m_age, _m_arith, _m_system, _m_time, _m_probability,
)

# ====================================================================== qa
QA_TOPICS = [
    "the water cycle", "gravity", "black holes", "the immune system", "inflation", "supply and demand",
    "compound interest", "the French Revolution", "the Industrial Revolution", "the Renaissance", "democracy",
    "the printing press", "plate tectonics", "earthquakes", "volcanoes", "tides", "the greenhouse effect",
    "renewable energy", "solar panels", "wind turbines", "nuclear power", "electricity", "magnetism",
    "the speed of light", "sound waves", "rainbows", "the periodic table", "atoms", "DNA", "evolution",
    "natural selection", "cells", "the human heart", "the digestive system", "the brain", "sleep cycles",
    "antibiotics", "allergies", "nutrition labels", "protein", "carbohydrates", "exercise and the heart",
    "the stock market", "taxes", "budgeting", "credit scores", "cryptocurrency", "the internet",
    "search engines", "computer memory", "operating systems", "programming languages", "machine learning",
    "encryption", "passwords", "cloud computing", "GPS", "smartphones", "3D printing", "robots",
    "the Roman Empire", "ancient Egypt", "the pyramids", "the Silk Road", "the Cold War", "the Moon landing",
    "the Olympic Games", "the United Nations", "the European Union", "world time zones", "maps and projections",
    "rainforests", "deserts", "oceans", "coral reefs", "glaciers", "rivers", "mountains", "hurricanes",
    "tornadoes", "lightning", "clouds", "the solar system", "Mars", "Jupiter", "stars", "galaxies",
    "the Big Bang", "satellites", "the International Space Station", "bees and pollination", "bird migration",
    "dinosaurs", "fossils", "whales", "ants", "recycling", "composting toilets", "plastic pollution",
    "electric cars", "airplanes", "trains", "bridges", "skyscrapers", "concrete", "glass", "paper making",
    "coffee", "bread baking", "fermentation", "vitamins", "meditation", "habits", "memory", "language learning",
    "music scales", "perspective in drawing", "photography exposure", "chess openings", "the rules of soccer",
    "marathon training", "first aid basics", "fire safety", "elections",
]
QA_TEMPLATES = (
    "Explain {t} in simple terms.",
    "What should everyone know about {t}? Give me the key points.",
    "Give me a short overview of {t}.",
    "How would you explain {t} to a ten-year-old?",
    "What are three interesting facts about {t}?",
    "What are some common misconceptions about {t}?",
    "Write a short explanation of {t} for a high school student.",
    "Why should people care about {t}? Answer in a few sentences.",
)
QA_PAIRS = [
    ("a comet", "an asteroid"), ("a lake", "a pond"), ("a hurricane", "a typhoon"), ("speed", "velocity"),
    ("mass", "weight"), ("an alligator", "a crocodile"), ("a republic", "a monarchy"), ("RAM", "storage"),
    ("a debit card", "a credit card"), ("baking soda", "baking powder"), ("a fruit", "a vegetable"),
    ("a simile", "a metaphor"), ("an element", "a compound"), ("a meteor", "a meteorite"), ("HTTP", "HTTPS"),
    ("a loan", "a mortgage"), ("stocks", "bonds"), ("a turtle", "a tortoise"), ("an ocean", "a sea"),
    ("a violin", "a viola"), ("a recession", "a depression"), ("a planet", "a star"), ("AC", "DC electricity"),
    ("a latitude", "a longitude"), ("a hill", "a mountain"), ("empathy", "sympathy"), ("a rabbit", "a hare"),
    ("socialism", "capitalism"), ("a lagoon", "a bay"), ("a frog", "a toad"),
]
QA_PAIR_TEMPLATES = (
    "What is the difference between {a} and {b}?",
    "Compare {a} and {b}. How are they similar, and how are they different?",
    "People often confuse {a} with {b}. Can you explain the difference?",
)
QA_QUESTIONS = [
    "Why do cats purr?", "How does a refrigerator keep food cold?", "Why does ice float on water?",
    "How do airplanes stay in the air?", "Why do leaves change color in autumn?", "How does a microwave oven work?",
    "Why is the ocean salty?", "How do bees make honey?", "Why do we get hiccups?", "How does a compass work?",
    "Why does bread go stale?", "How do noise-cancelling headphones work?", "Why do stars twinkle?",
    "How do fish breathe underwater?", "Why do we yawn?", "How does a battery store energy?",
    "Why do onions have layers?", "How do submarines dive and surface?", "Why does metal feel colder than wood?",
    "How does a credit card payment work?", "Why do some people need glasses?", "How do chameleons change color?",
    "Why is Venus hotter than Mercury?", "How does a thermostat work?", "Why do we have leap years?",
    "How did people tell time before clocks?", "Why do bubbles form when water boils?",
    "How does a touchscreen know where you tapped?", "Why do cut apples turn brown?", "How do elevators work?",
    "Who painted the Mona Lisa, and why is it so famous?", "What is the largest ocean on Earth?",
    "How many bones are in the adult human body?", "Which planet has the most moons?",
    "What language has the most native speakers?", "Why did the Titanic sink?", "How do hot air balloons fly?",
    "What makes a desert a desert?", "How do glasses correct vision?", "Why do some animals hibernate?",
]

# ====================================================================== writing
EMAIL_PURPOSES = [
    "ask a landlord to fix a leaking kitchen tap", "invite colleagues to a farewell party for a teammate",
    "follow up after a job interview", "ask a professor for an extension on an essay",
    "complain politely about a late delivery", "thank a client for a successful project",
    "request a refund for a broken toaster", "introduce yourself to a new team",
    "remind a friend about money they borrowed", "ask a neighbor to keep the noise down at night",
    "cancel a gym membership", "apologize for missing a meeting", "welcome a new employee",
    "ask your team for feedback on a presentation", "decline a wedding invitation kindly",
    "announce a change in office hours", "ask a local bakery to cater a small event",
    "recommend a former colleague for a job", "confirm a dentist appointment", "ask for a day off to move house",
]
EMAIL_TEMPLATES = (
    "Write a short email to {p}.", "Write a polite but firm email to {p}.",
    "Draft a friendly, informal message to {p}.", "Write a short, warm email to {p}.",
    "Write a professional email to {p}. Keep it under 120 words.",
)
POEM_SUBJECTS = [
    "the first snow of winter", "a busy city at night", "an old oak tree", "the sea at dawn", "a lost umbrella",
    "morning coffee", "a thunderstorm", "a cat watching birds", "the last day of summer", "a train journey",
    "a grandmother's kitchen", "the Moon over a quiet lake", "a garden after rain", "learning to ride a bike",
    "a lighthouse keeper's dog", "a library on a rainy day", "a mountain sunrise", "friendship",
    "a crowded market", "a sleepy Sunday morning", "fireflies", "an empty playground", "the smell of fresh bread",
    "a rocket launch", "a field of sunflowers",
]
POEM_FORMS = ("a haiku", "a four-line rhyming poem", "a short free-verse poem", "a limerick",
              "a poem of three short stanzas", "an acrostic poem using the word HOME")
STORY_PREMISES = [
    "a girl who finds a map in a library book", "a dragon afraid of the dark", "a detective who is a talking parrot",
    "two strangers stuck in an elevator", "an astronaut who hears music on Mars", "a village where it never rains",
    "a shy boy who enters a cooking contest", "a clock that runs backwards", "a lost dog finding its way home",
    "a lighthouse that blinks messages", "a painter whose paintings come alive", "the last bookshop in a city",
    "a time traveler who forgets why she came", "a cat who becomes mayor", "a snowman who wants to see summer",
    "an old fisherman and a clever seagull", "a kid who swaps places with a robot", "a garden that grows overnight",
    "a bus driver with a secret", "a message in a bottle",
]
STORY_TEMPLATES = (
    "Write a short story about {p}.", "Write a 100-word story about {p}.",
    "Tell me a bedtime story for a six-year-old about {p}.", "Write a funny short story about {p}.",
    "Write the opening paragraph of a novel about {p}.",
    "Write a story of about 200 words about {p}, with a surprising ending.",
)
PRODUCTS = [
    "a solar-powered phone charger", "noise-cancelling earbuds", "a bamboo cutting board", "a smart plant pot",
    "a folding electric bike", "an herbal tea gift box", "a weighted blanket", "a travel coffee grinder",
    "a waterproof hiking jacket", "a children's puzzle globe", "a mechanical keyboard", "a cast-iron pan",
    "a reusable notebook", "a desk lamp with wireless charging", "handmade soy candles", "a language-learning app",
    "a robot vacuum cleaner", "a yoga mat made of cork", "a pocket-sized projector", "a dog raincoat",
]
PRODUCT_TEMPLATES = (
    "Write a product description for {p}.", "Write a catchy slogan for {p}. Give me five options.",
    "Write a short, enthusiastic social media post announcing {p}.",
    "Write a product description for {p} aimed at busy parents. Keep it under 80 words.",
)
LETTER_TEMPLATES = (
    "Write a thank-you letter to {p}.", "Write a short speech to thank {p}.",
    "Write a birthday card message for {p}.", "Write a short, heartfelt message to {p}.",
)
LETTER_PEOPLE = [
    "a teacher who helped you love science", "a coach at the end of the season", "a nurse who cared for your father",
    "your best friend who is moving abroad", "a mentor at work", "a bus driver who found your wallet",
    "your grandparents", "a volunteer at the animal shelter", "the organizers of a charity run",
    "a colleague who is retiring",
]

# ====================================================================== chat
SITUATIONS = [
    "just moved to a new city and don't know anyone", "keep procrastinating on my studies",
    "want to start running but get tired after five minutes", "have trouble falling asleep before midnight",
    "am nervous about a job interview next week", "want to save money for a trip next summer",
    "have too many browser tabs and apps and feel overwhelmed", "want to learn to cook but only have a microwave",
    "get distracted by my phone all the time", "have a friend who always cancels plans",
    "want to read more books this year", "feel stuck in my job", "want to learn a new language in my free time",
    "have a big presentation and get stage fright", "want to eat healthier without spending much",
    "share an apartment with a messy roommate", "want to get back into drawing", "am bored on weekends",
    "have a small balcony and want to grow vegetables", "want to be more organized at work",
    "can't decide whether to get a cat or a dog", "want to make my small bedroom feel bigger",
    "am starting university next month", "want to spend less time on social media",
    "forgot my best friend's birthday", "want to host a dinner party for the first time",
    "feel tired every afternoon", "want to start a small side business", "have to work with a difficult coworker",
    "want to keep in touch with old friends", "am planning to change careers at 35",
    "want to teach my kid to ride a bike", "keep losing my keys", "want to run a half marathon in six months",
    "have a long flight coming up", "want to declutter my apartment", "am learning guitar but progress is slow",
    "want to volunteer but don't know where", "get anxious when I have to make phone calls",
    "want to take better photos with my phone",
]
SITUATION_TEMPLATES = (
    "I {s}. Any advice?", "Hey! I {s}. What would you do in my place?",
    "So I {s}, and I'm not sure where to start. Can you help?", "I {s}. Can you give me three practical tips?",
    "Quick question: I {s}. What's the first small step I should take?",
    "I {s}. Be honest, what am I probably doing wrong?",
)
TRIP_PLACES = [
    "Lisbon", "Kyoto", "the Scottish Highlands", "Barcelona", "a national park", "Rome", "Vienna",
    "the coast of Norway", "Mexico City", "a small beach town", "Prague", "Vancouver", "the Alps",
    "Istanbul", "Amsterdam",
]
TRIP_TEMPLATES = (
    "Help me plan a {d} trip to {p} on a tight budget.", "What should I pack for a {d} trip to {p}?",
    "I'm going to {p} for a {d} trip with two kids. What should we do?",
    "Plan a relaxed {d} itinerary for {p}.",
)
TRIP_DURATIONS = ("weekend", "three-day", "one-week", "ten-day")
CHAT_OPINIONS = [
    "What's your favorite season, and why?", "Is it better to read the book or watch the movie first?",
    "Do you think people should learn to code at school?", "What's a good hobby to pick up this winter?",
    "Cats or dogs: which make better pets for a small apartment?", "What makes a good friend, in your opinion?",
    "Is it worth learning to play the piano as an adult?", "What's the best way to spend a rainy Sunday?",
    "Recommend me a board game for four people.", "What should I cook tonight with eggs, spinach and rice?",
    "Tell me a fun fact about octopuses.", "Can you suggest a name for my new goldfish?",
    "What's a good question to break the ice at a party?", "Give me an idea for a fun weekend project.",
    "Is breakfast really the most important meal of the day?", "How do I politely end a conversation?",
    "What are some good habits to start the morning?", "Suggest three podcasts topics for a long drive.",
    "What's a simple dessert I can make in 15 minutes?", "How can I make my work-from-home setup more pleasant?",
    "What do you think is the most useful invention ever?", "Give me a short pep talk before my exam.",
    "I'm bored. Suggest something creative I can do in 30 minutes.", "How do I choose a good watermelon?",
]
MENU_TEMPLATES = (
    "Can you plan a {meal} menu for {n} people, one of whom is {diet}?",
    "I'm cooking {meal} for {n} friends and one is {diet}. What should I make?",
)
MEALS = ("dinner", "brunch", "picnic lunch", "birthday dinner")
DIETS = ("vegetarian", "vegan", "gluten-free", "allergic to nuts", "lactose intolerant")

# ====================================================================== extra writing slots
BLOG_TOPICS = [
    "saving energy at home", "learning to swim as an adult", "starting a book club", "walking to work",
    "keeping houseplants alive", "cooking with seasonal vegetables", "taking a digital detox weekend",
    "visiting museums with kids", "repairing clothes instead of replacing them", "birdwatching for beginners",
    "making friends after thirty", "planning a budget road trip", "volunteering at a food bank",
    "learning to draw with a pencil", "camping for the first time",
]
BLOG_TEMPLATES = (
    "Write a short blog post introduction about {p}.", "Write five tips for a blog post about {p}.",
    "Write a tweet-length post encouraging people to try {p}.",
)
BUSINESSES = [
    "a neighborhood bike repair shop", "a family-run pizza place", "a dog-walking service", "a small bookstore café",
    "a vegan bakery", "a language school", "a plumbing company", "a yoga studio", "a used-furniture store",
    "a mobile car wash", "a children's swimming school", "a local farmers' market",
]
BUSINESS_TEMPLATES = ("Write a catchy slogan for {p}.", "Write a 30-second radio ad for {p}.")

# ====================================================================== summarization and rag templates
SUMM_TEMPLATES = (
    "Summarize the following paragraph in one sentence.\n\n{p}",
    "TL;DR this for me:\n\n{p}",
    "Summarize the main points of this text as three bullet points.\n\n{p}",
    "Write a two-sentence summary of the passage below.\n\n{p}",
    "Give this text a short title and a one-sentence summary.\n\n{p}",
    "What is the main idea of this paragraph? Answer in one sentence.\n\nText: {p}",
    "Summarize this for a busy reader in under 30 words.\n\n{p}",
    "Summarize the passage below for a ten-year-old.\n\n{p}",
    "Read the text and list its key facts as short bullet points.\n\n{p}",
    "Condense the following into at most three sentences.\n\n{p}",
    "Summarize:\n\n{p}",
    "Write a one-line summary of this text, then say in one sentence who would find it useful.\n\n{p}",
    "Rewrite this passage as a short summary for a newsletter.\n\n{p}",
    'In one sentence, what is this text about?\n\n"{p}"',
)
SUMM_PAIR_TEMPLATE = "Summarize each of these two texts in one sentence.\n\nText 1: {a}\n\nText 2: {b}"
RAG_TEMPLATES = (
    "Context: {p}\n\nQuestion: {q}",
    "Use the context below to answer the question.\n\nContext:\n{p}\n\nQuestion: {q}",
    "Answer the question using only the information in the context.\n\nContext: {p}\n\nQuestion: {q}",
    "Context:\n{p}\n\nBased on the context above: {q}",
    "Read the context and answer briefly. If the answer is not in the context, say so.\n\nContext: {p}\n\n"
    "Question: {q}",
    "Context: {p}\n\nQuestion: {q}\nAnswer in one sentence and quote the part of the context that supports it.",
)
RAG_PAIR_TEMPLATES = (
    "Context:\n[1] {a}\n[2] {b}\n\nQuestion: {q}\nSay which passage contains the answer.",
    "Use the two passages below to answer the question.\n\nPassage A: {a}\n\nPassage B: {b}\n\nQuestion: {q}",
)


# fmt: on


# ====================================================================== pools
def _fill(templates: Iterable[str], **slots: Iterable) -> list[str]:
    """Every template x every combination of slot values (slots are named as in the templates)."""
    names = list(slots)
    combos: list[dict] = [{}]
    for name in names:
        combos = [{**c, name: v} for c in combos for v in slots[name]]
    return [t.format(**c) for t in templates for c in combos]


def _coding(r: random.Random) -> list[str]:
    out = _fill(CODE_TEMPLATES, lang=CODE_LANGS, task=CODE_TASKS)
    out += [t.format(schema=s, goal=g) for t in SQL_TEMPLATES for s, g in SQL_TASKS]
    out += _fill(BASH_TEMPLATES, task=BASH_TASKS)
    out += [t.format(goal=g, code=c) for t in BUGGY_TEMPLATES for g, c in BUGGY]
    return out


def _math(r: random.Random) -> list[str]:
    out = []
    for make in MATH_MAKERS:
        for _ in range(60):
            out.append(make(r) + r.choice(MATH_SUFFIXES))
    return out


def _summarization(r: random.Random) -> list[str]:
    texts = [p for _, p, _ in PASSAGES]
    out = _fill(SUMM_TEMPLATES, p=texts)
    for i, a in enumerate(texts):
        for k in (1, 2, 3):
            out.append(SUMM_PAIR_TEMPLATE.format(a=a, b=texts[(i + 7 * k) % len(texts)]))
    return out


def _translation(r: random.Random) -> list[str]:
    out = _fill(TRANSLATE_TEMPLATES, lang=LANGUAGES, text=SENTENCES)
    pairs = [f"{SENTENCES[i]} {SENTENCES[i + 1]}" for i in range(0, len(SENTENCES) - 1)]
    out += _fill(TRANSLATE_PAIR_TEMPLATES, lang=LANGUAGES, text=pairs)
    out += [t.format(lang=lang, text=s) for t in REVERSE_TEMPLATES for lang, s in REVERSE]
    return out


def _qa(r: random.Random) -> list[str]:
    out = _fill(QA_TEMPLATES, t=QA_TOPICS)
    out += [t.format(a=a, b=b) for t in QA_PAIR_TEMPLATES for a, b in QA_PAIRS]
    return out + list(QA_QUESTIONS)


def _rag(r: random.Random) -> list[str]:
    out = []
    for i, (_, p, qs) in enumerate(PASSAGES):
        for q in qs:
            out += [t.format(p=p, q=q) for t in RAG_TEMPLATES]
            for t in RAG_PAIR_TEMPLATES:
                other = PASSAGES[(i + r.randrange(1, len(PASSAGES))) % len(PASSAGES)][1]
                a, b = (p, other) if r.random() < 0.5 else (other, p)
                out.append(t.format(a=a, b=b, q=q))
    return out


def _writing(r: random.Random) -> list[str]:
    out = _fill(EMAIL_TEMPLATES, p=EMAIL_PURPOSES)
    out += [f"Write {form} about {s}." for form in POEM_FORMS for s in POEM_SUBJECTS]
    out += _fill(STORY_TEMPLATES, p=STORY_PREMISES)
    out += _fill(PRODUCT_TEMPLATES, p=PRODUCTS)
    out += _fill(LETTER_TEMPLATES, p=LETTER_PEOPLE)
    out += _fill(BLOG_TEMPLATES, p=BLOG_TOPICS)
    return out + _fill(BUSINESS_TEMPLATES, p=BUSINESSES)


def _chat(r: random.Random) -> list[str]:
    out = _fill(SITUATION_TEMPLATES, s=SITUATIONS)
    out += _fill(TRIP_TEMPLATES, d=TRIP_DURATIONS, p=TRIP_PLACES)
    out += _fill(MENU_TEMPLATES, meal=MEALS, n=(4, 6, 8), diet=DIETS)
    return out + list(CHAT_OPINIONS)


_MAKERS: dict[str, Callable[[random.Random], list[str]]] = {
    "coding": _coding, "math": _math, "summarization": _summarization, "translation": _translation,
    "qa": _qa, "rag": _rag, "writing": _writing, "chat": _chat,
}  # fmt: skip


def category_pools(seed: int = 0, exclude: Iterable[str] = ()) -> dict[str, list[str]]:
    """Per category, every unique prompt the bank can make, in a seeded random order.

    A text is kept once (in the first category that makes it) and dropped if it is in `exclude`.
    """
    seen = set(exclude)
    pools: dict[str, list[str]] = {}
    for cat in CATEGORIES:
        # the seed string keeps this file's former module name: another string would change every prompt
        r = random.Random(f"specdec_lab.prompt_bank:{seed}:{cat}")
        pool = []
        for text in _MAKERS[cat](r):
            if text not in seen:
                seen.add(text)
                pool.append(text)
        r.shuffle(pool)
        pools[cat] = pool
    return pools


def _capacity(sizes: list[int]) -> int:
    """Largest n whose round-robin split (category i gets n // 8 + (i < n % 8)) fits every category."""
    m = min(sizes)
    extra = 0
    while extra < len(sizes) and sizes[extra] > m:
        extra += 1
    return len(sizes) * m + extra


def bank_size(seed: int = 0, exclude: Iterable[str] = ()) -> int:
    """How many unique, category-balanced prompts `build_prompts` can return for this seed and exclusion set."""
    return _capacity([len(p) for p in category_pools(seed, exclude).values()])


def build_prompts(n: int, seed: int = 0, start_id: int = 1001, exclude: Iterable[str] = ()) -> list[dict]:
    """`n` unique prompts in Spec-Bench format, round-robin over `CATEGORIES` so any prefix is balanced.

    Rows are ``{"question_id": start_id + i, "category": ..., "turns": [text]}``; texts in `exclude` are skipped.
    The result depends only on (n, seed, start_id, exclude). Raises ValueError if n is more than the bank can make.
    """
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    pools = category_pools(seed, exclude)
    cap = _capacity([len(p) for p in pools.values()])
    if n > cap:
        sizes = ", ".join(f"{c}={len(p)}" for c, p in pools.items())
        raise ValueError(
            f"n={n} is more than the prompt bank can make: at most {cap} unique prompts balanced across "
            f"{len(CATEGORIES)} categories for seed={seed} (unique prompts per category: {sizes})"
        )
    rows = []
    for i in range(n):
        cat = CATEGORIES[i % len(CATEGORIES)]
        rows.append({"question_id": start_id + i, "category": cat, "turns": [pools[cat][i // len(CATEGORIES)]]})
    return rows


def read_texts(path: str | os.PathLike) -> list[str]:
    """All user turns of a Spec-Bench jsonl file."""
    with open(path, encoding="utf-8") as f:
        return [turn for line in f if line.strip() for turn in json.loads(line)["turns"]]


def main(argv: list[str] | None = None) -> int:
    from specdec_lab.io import write_jsonl  # here, not at the top: building the bank needs no torch

    ap = argparse.ArgumentParser(description="Build extra self-distillation prompts (Spec-Bench jsonl).")
    ap.add_argument("--n", type=int, default=1600, help="number of prompts")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start-id", type=int, default=1001, help="question_id of the first prompt")
    ap.add_argument("--out", default=str(DATA_DIR / "train_prompts_extra.jsonl"))
    ap.add_argument(
        "--exclude",
        nargs="*",
        default=[str(p) for p in DEFAULT_EXCLUDE_FILES],
        help="jsonl files whose texts must not appear (default: the benchmark and train prompts)",
    )
    args = ap.parse_args(argv)
    exclude = [t for path in args.exclude for t in read_texts(path)]
    rows = build_prompts(args.n, seed=args.seed, start_id=args.start_id, exclude=exclude)
    write_jsonl(args.out, rows)
    counts = Counter(row["category"] for row in rows)
    print(f"wrote {len(rows)} prompts to {args.out} (bank size {bank_size(args.seed, exclude)})")
    for cat in CATEGORIES:
        print(f"  {cat:14s} {counts[cat]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
